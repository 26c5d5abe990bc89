/* What the files of perseus demo --inference share (demo_infer.c, demo_infer_start.c): the demo's
 * layout (instances, pools, classes) and its state. */
#ifndef PRS_CLI_DEMO_INFER_INT_H
#define PRS_CLI_DEMO_INFER_INT_H

#include <jansson.h>

#include "demo_infer.h"

#define DEMO_MODEL "llama2-70b"
#define DEMO_GPU "h100"
#define DEMO_NGPUS 12 /* 2 x TP 2 + 2 x TP 4 */

extern const char *const pool_names[DEMO_NPOOLS];
extern const char *const inst_names[DEMO_NINST];
extern const int inst_tp[DEMO_NINST];
extern const int inst_pool[DEMO_NINST];
extern const int pool_of_class[PRS_INFER_NCLASS];

typedef struct dargs {
    const char *trace_path; /* NULL: look next to the source tree, else synthetic */
    double from_s, duration_s, time_scale;
    double headroom;     /* the controllers' --headroom */
    const char *out_dir; /* NULL: --no-plots */
} dargs;

typedef struct demo_state {
    demo_procs ps;
    dargs a;
    prs_infer_trace trace;
    const char *trace_name;
    int server_port, router_port, fake_port[DEMO_NINST];
    int ctl[DEMO_NINST]; /* the controllers' process indices, -1 when not running */
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
    double desired_rps;
} demo_state;

/* demo_infer_start.c: what a pool's controllers plan for (demo_start_ctl), one target per input
 * class of the pool: the 99th percentile prompt of the trace's requests of the class (without
 * any: its bound) and the class's TTFT SLO, into tokens and ttft_s (3 each); how many. */
int demo_pool_targets(const demo_state *st, int pool, int *tokens, double *ttft_s);
/* demo_infer_start.c: each 0, or 1 with a message. */
int demo_start_perseusd(demo_state *st);
int demo_declare_cluster(demo_state *st);
int demo_start_gpud(demo_state *st);
int demo_start_fakes(demo_state *st);
int demo_start_router(demo_state *st);
int demo_start_ctl(demo_state *st, int i, int first_gpu);
int demo_gpu_clocks(const demo_state *st, int *mhz, int max);

#endif
