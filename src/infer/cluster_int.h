/* The replay's state shared by the cluster (cluster.c: events, routing, accounting) and the
 * policies (policy.c: decisions at each level). Internal to src/infer. */
#ifndef PRS_INFER_CLUSTER_INT_H
#define PRS_INFER_CLUSTER_INT_H

#include "cluster.h"
#include "engine.h"
#include "evheap.h"
#include "sizing.h"

enum { INST_ACTIVE, INST_STARTING, INST_DRAINING };

typedef struct prs__infer_inst {
    prs_infer_engine *e;
    int pool;
    int type;  /* index into the captable's TPs */
    int clock; /* index into the captable's clocks */
    int state;
    double ready_s;
    double retire_s; /* > 0: leaving; serves until then (its successors are ready), then drains */
    double rate_rps; /* its share of the pool's recent load (instance level) */
} prs__infer_inst;

typedef struct prs__infer_flags {
    int npools;
    int knob_inst, knob_tp, knob_clock;
    int oracle, free_reconf;
    int phase;               /* decode steps at their own clock (phase.c) */
    double cluster_period_s; /* the lower bound re-plans the cluster at the pool period */
} prs__infer_flags;

typedef struct prs__infer_cluster {
    const prs_infer_trace *trace;
    const prs_infer_perf *perf;
    const prs_infer_captable *caps;
    const prs_infer_opts *o;
    prs__infer_flags fl;
    prs_infer_result *res;
    prs__infer_inst *inst;
    prs__infer_evheap events; /* each instance's next event */
    int n_inst, cap_inst;
    int gpus_now;
    double gpu_s, gpu_since_s;
    /* Arrivals per pool (by predicted class) per instance-period bin: the forecasts. */
    uint32_t *bin_counts; /* n_bins x npools */
    size_t n_bins;
    /* Sizing tables, one per pool, for the policy's knobs. */
    prs_infer_pool_table tables[PRS_INFER_NCLASS];
    int budget[PRS_INFER_NCLASS]; /* GPUs each pool may hold (cluster level) */
    int mix_of_pool[PRS_INFER_NCLASS];
    double now_s;
    double horizon_s; /* the next tick (INFINITY while draining): no decode run goes past it */
} prs__infer_cluster;

/* cluster.c */
/* GPUs in service change by delta (0: bring the GPU-seconds up to now). */
void prs__infer_cluster_gpus(prs__infer_cluster *c, int delta);
/* Give back the GPUs of drained instances that hold nothing more. */
void prs__infer_cluster_reap(prs__infer_cluster *c);
/* Arrivals per instance period and pool, for the forecasts. */
int prs__infer_cluster_bins(prs__infer_cluster *c, const int8_t *pool_of, prs_error *err);
/* Every instance and table the replay made. */
void prs__infer_cluster_free(prs__infer_cluster *c);
int prs__infer_cluster_add(prs__infer_cluster *c, int pool, int type, int clock, double ready_s,
                           prs_error *err);
/* Take instance i out of service at retire_s (now or later: it serves until then). */
void prs__infer_cluster_retire(prs__infer_cluster *c, int i, double retire_s);
int prs__infer_cluster_set_clock(prs__infer_cluster *c, int i, int clock, prs_error *err);
/* The pool's peak arrival rate over [from_s, to_s) (windows of peak_window_s). */
double prs__infer_pool_peak(const prs__infer_cluster *c, int pool, double from_s, double to_s);
/* The pool's highest arrival rate over one instance period in [from_s, to_s). */
double prs__infer_pool_bin_peak(const prs__infer_cluster *c, int pool, double from_s, double to_s);
/* The pool's mean arrival rate over [from_s, to_s). */
double prs__infer_pool_rate(const prs__infer_cluster *c, int pool, double from_s, double to_s);

/* policy.c */
void prs__infer_policy_flags(prs_infer_policy p, const prs_infer_opts *o, prs__infer_flags *f);
/* Build the pools' sizing tables and the initial configuration at time 0. */
int prs__infer_policy_init(prs__infer_cluster *c, prs_error *err);
/* The decisions due at tick time now_s (a multiple of the instance period). */
int prs__infer_policy_tick(prs__infer_cluster *c, double now_s, prs_error *err);
/* An emergency on instance i (its queue waits too long): 1 if handled by raising the clock. */
int prs__infer_policy_emergency(prs__infer_cluster *c, int i, prs_error *err);

/* powercap.c: the cluster's power budget (opts.power_cap_w) */
/* Predicted power of instance i at captable clock f: the capacity table's power at its planned
 * rate when active, its idle power otherwise. */
double prs__infer_inst_power(const prs__infer_cluster *c, int i, int f);
/* Lower the clocks want[] (captable indices, one per instance) step by step, the largest saving
 * first, until the predicted power fits the budget (counted in the result when it cannot). */
void prs__infer_powercap_fit(prs__infer_cluster *c, int *want);
/* 1 when instance i may go to clock f with the cluster's predicted power within the budget. */
int prs__infer_powercap_room(const prs__infer_cluster *c, int i, int f);
/* The measured power bins above the budget, into the result. */
void prs__infer_powercap_account(prs__infer_cluster *c, double end_s);

/* phase.c */
/* Set instance i's decode clock for its running batch (the phase policy). */
int prs__infer_phase_clock(prs__infer_cluster *c, int i, prs_error *err);

#endif
