/* What the files of perseus demo --inference share (demo_infer.c, demo_infer_start.c): the demo's
 * layout (instances, pools, classes) and its state. */
#ifndef PRS_CLI_DEMO_INFER_INT_H
#define PRS_CLI_DEMO_INFER_INT_H

#include <jansson.h>

#include "demo_infer.h"

#define DEMO_MODEL "llama2-70b"
#define DEMO_GPU "h100"
#define DEMO_MAX_GPUS (DEMO_MAX_PER_POOL * (2 + 4))

extern const char *const pool_names[DEMO_NPOOLS];
/* The instances, set by demo_layout: --per-pool N in each pool, the short pool's (s1, s2, ...)
 * at TP 2, the long pool's (l1, l2, ...) at TP 4. */
extern const char *inst_names[DEMO_MAX_INST];
extern int inst_tp[DEMO_MAX_INST];
extern int inst_pool[DEMO_MAX_INST];
extern int demo_ninst, demo_ngpus;
void demo_layout(int per_pool);
extern const int pool_of_class[PRS_INFER_NCLASS];

typedef struct dargs {
    const char *trace_path; /* NULL: look next to the source tree, else synthetic */
    double from_s, duration_s, time_scale;
    double headroom;     /* the controllers' --headroom */
    int per_pool;        /* instances per pool */
    int max_running;     /* the fakes' --max-running and the router's max_running (0: theirs) */
    int compare;         /* --compare: the emulator's prediction beside the live runs */
    const char *out_dir; /* NULL: --no-plots */
} dargs;

typedef struct demo_state {
    demo_procs ps;
    dargs a;
    prs_infer_trace trace;
    const char *trace_name;
    int server_port, router_port, fake_port[DEMO_MAX_INST];
    int ctl[DEMO_MAX_INST]; /* the controllers' process indices, -1 when not running */
    char cluster_id[64], cluster_token[256];
    int gpud; /* perseus-gpud runs on the fake NVML; envp is its environment */
    char env[3][600];
    char *envp[4];
    int gpus_reset; /* GPUs back at their highest clock once the controllers stopped (-1: no gpud)
                     */
    demo_run run[2];
    double energy_j[2], duration_s[2];
    demo_sampler clocks;
    json_t *desired; /* the cluster's state when its load was highest */
    /* --compare: infer emulate --cluster's prediction of each run (0: max clock, 1: the
     * instance level): SLO attainment (%) and energy */
    int predicted;
    double pred_slo_pct[2], pred_energy_j[2];
    double desired_rps;
} demo_state;

/* demo_infer_compare.c: the emulator's prediction of both runs, on the router's own
 * configuration (--compare): 0, or 1 with a message; and its lines of the summary. */
int demo_predict(demo_state *st);
void demo_print_compare(const demo_state *st);
/* demo_infer_start.c: each 0, or 1 with a message. */
int demo_start_perseusd(demo_state *st);
int demo_declare_cluster(demo_state *st);
int demo_start_gpud(demo_state *st);
int demo_start_fakes(demo_state *st);
int demo_start_router(demo_state *st);
int demo_start_ctl(demo_state *st, int i, int first_gpu);
int demo_gpu_clocks(const demo_state *st, int *mhz, int max);

#endif
