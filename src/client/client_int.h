/* Internal to the client (src/client): the handle shared by the hooks (client.c, the training
 * thread) and the background thread (net.c). */
#ifndef PRS_CLIENT_INT_H
#define PRS_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "perseus/client.h"

typedef struct clientI_window {
    prs_instr instr;
    int microbatch;
    int clock_mhz;
    double time_s, energy_j;
} clientI_window;

/* One ended iteration waiting to be posted. */
typedef struct clientI_iteration {
    long iteration;
    long round;
    double time_s, energy_j;
    int clock_mhz;
    int n_windows; /* windows are kept only in the profiling phase */
    clientI_window *windows;
} clientI_iteration;

typedef struct clientI_schedule {
    char phase[16];
    long round;
    long plan_id; /* -1: null */
    int quota;    /* profiling: iterations the round needs (warm-up + measured); 0: no limit */
    int n;
    int *clocks; /* n entries, malloc'd */
} clientI_schedule;

struct prs_client {
    prs_client_opts opts; /* strings below point into this struct's own copies */
    char url[512], job_id[64], token[128];
    prs_gpu *gpu;
    int own_gpu;
    prs_clockctl *ctl;
    int f_max_mhz; /* tag of windows run at the default clock */

    /* Training thread only. */
    clientI_schedule cur;
    long cur_version;
    int op; /* position of the next computation in the iteration */
    int in_window;
    double win_t0, win_e0;
    int win_clock;
    clientI_window *wins;
    int n_wins, cap_wins;
    int iter_started;
    double iter_t0, iter_e0;
    long iter_no;
    long round_reported; /* iterations reported in the current schedule */

    /* Shared, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    clientI_schedule latest; /* newest schedule from the server */
    atomic_long latest_version;
    clientI_iteration *queue; /* ring of opts.max_queue; the bg thread pops, the hooks push */
    int q_head, q_len;
    int stop;
    prs_client_stats stats;
    atomic_long clock_failures;
    atomic_int clock_mhz;

    pthread_t thread;
    int thread_started;
};

/* net.c */
void clientI_global_init(void);
/* Create the job from opts.job_spec_json (blocking). Fills job_id and token. */
int clientI_create_job(prs_client *c, prs_error *err);
void *clientI_thread_main(void *arg);
void clientI_schedule_free(clientI_schedule *s);
void clientI_iteration_free(clientI_iteration *it);
double clientI_mono_s(void);

#endif
