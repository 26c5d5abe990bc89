/* Replaying a trace on a fixed cluster (fixed.c): the instances a live deployment runs (their
 * pool, TP and clock), none started or stopped, routed and clocked by rules the caller supplies,
 * so that the emulation follows a live router and clock controllers decision for decision.
 *
 * A request goes, at its arrival, to the instance the route hook names from every instance's
 * requests in flight (queued or running, as a router counts them), or is rejected (-1: no room,
 * as a router's 503). With an instance period, every period (from time 0) the clock hook gets
 * each instance's load as its engine would report it (running and waiting requests, KV cache in
 * use, the prompt tokens prefilled per second since the last decision) and returns its clock,
 * which the iterations started from then on run at (no pause: a fake instance has none).
 * Energy counts every instance over the whole replay, from time 0 to the last request's end,
 * idle time included. */
#ifndef PRS_INFER_FIXED_H
#define PRS_INFER_FIXED_H

#include "perf.h"
#include "stats.h"
#include "trace.h"

#define PRS_INFER_FIXED_MAX_INST 64

typedef struct prs_infer_fixed_load {
    double running, waiting; /* requests */
    double kv_usage;         /* share of the KV cache the running requests hold, 0..1 */
    double prompt_rate;      /* prompt tokens prefilled per second over the last period */
} prs_infer_fixed_load;

typedef struct prs_infer_fixed_hooks {
    void *ud;
    /* The instance for a request of class klass given inflight[] per instance; -1: rejected.
     * *rerouted: 1 when the instance is outside the class's pool. */
    int (*route)(void *ud, const int *inflight, int klass, long in_tokens, long out_tokens,
                 int *rerouted);
    /* The clock (MHz) of instance i at load (NULL: clocks stay as configured). */
    int (*clock)(void *ud, int i, const prs_infer_fixed_load *load, int *mhz, prs_error *err);
} prs_infer_fixed_hooks;

typedef struct prs_infer_fixed_cfg {
    int n_inst;
    /* Each instance's performance backend (its largest batch is the backend's capacity). */
    const prs_infer_perf *perf[PRS_INFER_FIXED_MAX_INST];
    int tp[PRS_INFER_FIXED_MAX_INST], mhz[PRS_INFER_FIXED_MAX_INST];
    long max_batched_tokens; /* prefill token budget (8192) */
    prs_infer_classes classes;
    double instance_period_s; /* 0: no instance level */
    int run_steps;            /* decode steps computed ahead as one event (engine.h) */
    prs_infer_fixed_hooks hooks;
} prs_infer_fixed_cfg;

typedef struct prs_infer_fixed_result {
    double energy_j, duration_s;
    long requests, rejected, rerouted, on_time, clock_changes;
    prs_infer_latency lat;
    /* Per instance: requests served, and the clocks in force over the replay (mean over the
     * decisions, first included; min, max). */
    long served[PRS_INFER_FIXED_MAX_INST];
    double mhz_mean[PRS_INFER_FIXED_MAX_INST];
    int mhz_min[PRS_INFER_FIXED_MAX_INST], mhz_max[PRS_INFER_FIXED_MAX_INST];
    double energy_inst_j[PRS_INFER_FIXED_MAX_INST];
} prs_infer_fixed_result;

/* Replay trace (arrivals from 0) on cfg's instances. PRS_EINVAL naming the field
 * when cfg is out of range (no instance, more than PRS_INFER_FIXED_MAX_INST, no route hook, a
 * negative period, a backend missing) or a request fits no instance's KV cache; a hook's or the
 * backend's error. out is caller-allocated (it is large) and fully written. */
int prs_infer_fixed_replay(const prs_infer_trace *trace, const prs_infer_fixed_cfg *cfg,
                           prs_infer_fixed_result *out, prs_error *err);

#endif
