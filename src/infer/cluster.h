/* Replaying a trace on a serving cluster under a policy (cluster.c, policy.c).
 *
 * The cluster holds up to `gpus` GPUs in instances (engine.h), grouped in pools: one pool for
 * singlepool, the 9 request classes' pools otherwise. A request goes to the pool of its input
 * class and its predicted output class, and inside the pool to the active instance with the
 * fewest outstanding tokens per GPU that fits it; a pool with no such instance passes it to
 * the next larger pool (counted as re-routed). Policies (policy.c) decide, at their periods,
 * how many GPUs each pool holds (cluster level), the TP mix of its instances (pool level) and
 * each instance's clock (instance level), from the capacity table (capacity.h) and the exact
 * sizing (sizing.h). Energy counts every provisioned GPU: instances serving, starting or
 * draining, busy or idle. */
#ifndef PRS_INFER_CLUSTER_H
#define PRS_INFER_CLUSTER_H

#include "capacity.h"
#include "stats.h"
#include "trace.h"

typedef enum prs_infer_policy {
    PRS_INFER_SINGLEPOOL, /* one pool, TP 8, max clock, sized for the trace's peak */
    PRS_INFER_MULTIPOOL,  /* 9 pools, TP 8, max clock, each sized for its class's peak */
    PRS_INFER_INSTANCES,  /* multipool, instances per pool re-planned each cluster period */
    PRS_INFER_TP,         /* multipool's GPUs per pool, TP mix re-planned each pool period */
    PRS_INFER_CLOCK,      /* multipool, each instance's clock set each instance period */
    PRS_INFER_DYNAMOLLM,  /* all three levels, hierarchical */
    PRS_INFER_ORACLE,     /* all three with perfect knowledge (load, output lengths) and free
                           * reconfiguration, the cluster re-planned every pool period */
    PRS_INFER_PHASE,      /* dynamollm, and each instance's decode steps at their own clock:
                           * the lowest that slows a step by at most phase_slack (phase.c) */
    PRS_INFER_NPOLICY
} prs_infer_policy;

const char *prs_infer_policy_name(prs_infer_policy p);
/* PRS_EINVAL when name is not one of the names above. */
int prs_infer_policy_parse(const char *name, prs_infer_policy *out);

/* Reconfigurations by kind: an instance started (weights loaded), re-formed over resident
 * weights, stopped (drained, GPUs given back), a clock change, and pool changes not made because
 * they would not pay for themselves over the next period. */
enum {
    PRS_INFER_RECONF_START,
    PRS_INFER_RECONF_RESHARD,
    PRS_INFER_RECONF_STOP,
    PRS_INFER_RECONF_CLOCK,
    PRS_INFER_RECONF_SKIPPED,
    PRS_INFER_NRECONF
};

typedef struct prs_infer_opts {
    prs_infer_classes classes;
    long max_batched_tokens;
    int gpus;                  /* the cluster's GPUs (8 a server) */
    double cluster_period_s;   /* 1800 */
    double pool_period_s;      /* 300 */
    double instance_period_s;  /* 5 */
    double peak_window_s;      /* a period's load is its peak rate over windows of this (60) */
    double headroom;           /* planned load = forecast * headroom (1); the static
                                * policies, sized on the known peak, take none */
    double max_util;           /* an instance is planned for at most this share of its
                                * probed capacity (0.8): the trace is burstier than the
                                * Poisson probes */
    int oracle;                /* forecast from the next period (else the past one) */
    double predictor_accuracy; /* share of output classes predicted right (1: oracle) */
    double start_s;            /* starting an instance: loading the weights (30) */
    double reshard_s;          /* re-forming a TP group over resident weights (5) */
    double clock_s;            /* a clock change's pause (0.01) */
    int emergencies;           /* head-of-queue wait past emergency_share x TTFT SLO: max clock,
                                * then re-route to a larger pool (dynamic policies) */
    double emergency_share;    /* 0.5 */
    double power_bin_s;        /* cluster power sampled over bins of this (1) */
    int units_top;             /* sizing granularity: units an instance carries at most (24) */
    uint64_t seed;             /* the output-length predictor's errors */
    double power_cap_w;        /* the cluster's power budget (0: none; powercap.c) */
    double phase_slack;        /* phase: a decode step may take this share longer (0.1) */
    int run_steps;             /* decode steps an instance computes ahead as one event (64;
                                * 1: one at a time; the results are the same: engine.h) */
} prs_infer_opts;

void prs_infer_opts_default(prs_infer_opts *o);
/* PRS_EINVAL naming the option when a value is out of range. */
int prs_infer_opts_check(const prs_infer_opts *o, prs_error *err);

/* The cluster's configuration at each of the policy's ticks (every instance period): GPUs held
 * by each pool (instances serving, starting or leaving), their mean SM clock weighted by GPUs,
 * and instances of each TP degree. */
typedef struct prs_infer_config_log {
    size_t n, cap;
    double *t_s;
    int32_t *pool_gpus; /* n x PRS_INFER_NCLASS (pool 0 alone for singlepool) */
    float *pool_mhz;    /* n x PRS_INFER_NCLASS: 0 where the pool holds no GPU */
    int32_t *tp_insts;  /* n x PRS_INFER_MAX_TPS, degrees as in tps[] */
    int tps[PRS_INFER_MAX_TPS], n_tps, npools;
} prs_infer_config_log;

typedef struct prs_infer_result {
    prs_infer_policy policy;
    double energy_j;
    double gpu_hours;  /* provisioned */
    double duration_s; /* first arrival to the last request's end */
    double power_p50_w, power_p99_w;
    int peak_gpus;
    long requests, rerouted, emergencies, preemptions;
    long events;           /* instance events replayed (iteration ends; a decode run is one) */
    long underprovisioned; /* decisions whose forecast exceeded the cluster (load scaled) */
    long reconf[PRS_INFER_NRECONF];
    /* Under a power budget (opts.power_cap_w > 0): cluster decisions that planned for less than
     * the forecast to fit it, instance periods whose predicted power exceeded it even at the
     * lowest clocks, clock steps the budget took off the policy's choice, iterations above
     * their instance's share of it even at the lowest clock, and the measured power bins above
     * it (their total length and the largest excess). */
    long cap_short, cap_unmet, cap_lowered, cap_floor_iters;
    double over_cap_s, over_cap_max_w;
    prs_infer_latency lat;
    prs_infer_meter meter;     /* the power bins (owned: prs_infer_result_free) */
    prs_infer_config_log conf; /* (owned) */
} prs_infer_result;

/* Replay trace under policy p. caps from prs_infer_captable_build over the same perf, classes
 * and trace. On success *out (caller-allocated) holds the figures; free with
 * prs_infer_result_free. Errors: PRS_EINVAL when the policy cannot hold the load in o->gpus
 * GPUs at its peak for the static policies ("singlepool needs N GPUs at the peak ..."), or a
 * class no allowed configuration serves; a backend's error. */
int prs_infer_replay(const prs_infer_trace *trace, const prs_infer_perf *perf,
                     const prs_infer_captable *caps, const prs_infer_opts *o, prs_infer_policy p,
                     prs_infer_result *out, prs_error *err);
void prs_infer_result_free(prs_infer_result *r);

/* A lower bound on the energy of serving trace (cluster_bound.c): every instance period, each
 * class's mean arrival rate over it (true classes: perfect knowledge) carried by the least-power
 * configuration of the model (sizing.h, every TP and clock, the pool's GPUs bounded by the
 * cluster's but not shared with the other pools), reconfiguration free and instant, nothing
 * provisioned while no request comes. Below what any policy replayed on the same model can spend
 * as far as the model's power curves hold. */
int prs_infer_lower_bound(const prs_infer_trace *trace, const prs_infer_captable *caps,
                          const prs_infer_opts *o, double *energy_j, prs_error *err);

/* The rate-scale factor that makes singlepool need share of the cluster's GPUs at the trace's
 * peak (peak over o->peak_window_s windows; TP 8 instances at the top clock). */
int prs_infer_scale_for_share(const prs_infer_trace *trace, const prs_infer_captable *caps,
                              const prs_infer_opts *o, double share, double *factor,
                              prs_error *err);

#endif
