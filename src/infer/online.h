/* The dynamic policy's cluster and pool levels run online on reported loads (online.c), as
 * perseusd runs them for a declared cluster: the decisions are the emulator's (levels.h), the
 * load they see is what a router reports instead of a trace.
 *
 * Each report (a time and a rate per class) is added to windows of o->peak_window_s counted from
 * the first report (a report at t falls in the window ending at or after t); a forecast over a
 * period is the highest window mean among the windows ending within the period before the
 * report, times o->headroom. The first report plans at once, on its own rates, free (nothing
 * runs yet). Then the cluster level acts on the first report of each new cluster period (counted
 * from the first report): each pool's GPU budget from the forecast over the past cluster period;
 * the pool level likewise each pool period: each pool's optimum mix within its budget for the
 * forecast over the past pool period, made only when the power it saves over the next pool
 * period exceeds its reconfiguration energy (levels.h; starts and re-forms counted like the
 * emulator's). With emergencies on, a report whose rates the instances in force cannot carry
 * (times headroom, within the SLOs: the pool model's capacity) re-plans both levels at once on
 * the larger of the forecast and that load, and the pools that cannot carry it scale up whatever
 * it costs. Memory is bounded: PRS_INFER_ONLINE_WINDOWS windows (o->cluster_period_s /
 * o->peak_window_s must not exceed it). */
#ifndef PRS_INFER_ONLINE_H
#define PRS_INFER_ONLINE_H

#include "cluster.h"
#include "plan.h"
#include "sizing.h"

#define PRS_INFER_ONLINE_WINDOWS 1024

enum { PRS_INFER_ACT_NONE, PRS_INFER_ACT_INITIAL, PRS_INFER_ACT_PERIOD, PRS_INFER_ACT_EMERGENCY };
enum { PRS_INFER_OUT_KEPT, PRS_INFER_OUT_CHANGED, PRS_INFER_OUT_SKIPPED };

/* Decisions by kind, counted. */
enum {
    PRS_INFER_DEC_CLUSTER_PERIOD,    /* the cluster level at a period */
    PRS_INFER_DEC_CLUSTER_EMERGENCY, /* the cluster level at an emergency */
    PRS_INFER_DEC_POOL_CHANGED,      /* a pool change made at a period */
    PRS_INFER_DEC_POOL_SKIPPED,      /* a pool change not made: saving below its cost */
    PRS_INFER_DEC_POOL_EMERGENCY,    /* a pool change made at an emergency */
    PRS_INFER_NDEC
};

/* A level's latest action: when (report time; reason NONE: never), why, and what came of it;
 * for a pool, the saving over the next period of the change it considered and its cost (J). */
typedef struct prs_infer_online_act {
    double t_s;
    int reason, outcome;
    double saving_j, cost_j;
} prs_infer_online_act;

typedef struct prs_infer_online_window {
    long index; /* the window's number + 1 (0: the first report's), -1: empty slot */
    double sum_rps[PRS_INFER_NCLASS];
    int n;
} prs_infer_online_window;

typedef struct prs_infer_online {
    const prs_infer_captable *caps;
    const prs_infer_opts *o;
    int emergencies;
    prs_infer_pool_table tables[PRS_INFER_NCLASS];
    char no_config[PRS_INFER_NCLASS][sizeof(
        ((prs_error *)0)->msg)]; /* why a class has no model ("" when it has one) */
    /* The state a restart keeps (everything below). */
    int started;
    double t0_s, last_s;          /* the first report's time, the latest's */
    long cluster_slot, pool_slot; /* the periods the levels last acted in */
    int budget[PRS_INFER_NCLASS];
    int g[PRS_INFER_NCLASS], k[PRS_INFER_NCLASS]; /* the plan in force: GPUs and units */
    prs_infer_online_window win[PRS_INFER_ONLINE_WINDOWS];
    prs_infer_online_act cluster_act, pool_act, pool[PRS_INFER_NCLASS];
    long decisions[PRS_INFER_NDEC];
    long reconf[PRS_INFER_NRECONF];
    int short_of; /* the latest decision planned less than the forecast (levels.h SPLIT_*) */
    /* Derived from g and k (prs_infer_online_rebuild). */
    prs_infer_plan plan;
} prs_infer_online;

/* The levels for a cluster of capacity table caps and options o (both kept by reference: they
 * must outlive s). PRS_EINVAL when the periods are not as online.h needs. */
int prs_infer_online_new(const prs_infer_captable *caps, const prs_infer_opts *o, int emergencies,
                         prs_infer_online **out, prs_error *err);
void prs_infer_online_free(prs_infer_online *s);
/* PRS_EINVAL naming the option when the periods and the window do not fit together. */
int prs_infer_online_check(const prs_infer_opts *o, prs_error *err);
/* A load report at t_s (seconds, not before the previous one's: an earlier one is taken as
 * made at the previous time). PRS_ERANGE when the decision it caused could not carry the whole
 * forecast within the GPUs (the plan carries the largest uniform share that fits), PRS_EINVAL
 * when a class with load has no configuration meeting its SLOs; the state is updated anyway. */
int prs_infer_online_report(prs_infer_online *s, double t_s, const double *rates_rps,
                            prs_error *err);
/* Each class's peak window mean over the period_s before the latest report (the forecast,
 * before the headroom, a decision at that report would make for that period). */
void prs_infer_online_peaks(const prs_infer_online *s, double period_s, double *peak_rps);
/* Forget the state (the levels start afresh at the next report). */
void prs_infer_online_reset(prs_infer_online *s);
/* The plan in force made again from g and k (after the state was restored). */
void prs_infer_online_rebuild(prs_infer_online *s);
const char *prs_infer_online_reason_name(int reason);
const char *prs_infer_online_outcome_name(int outcome);
const char *prs_infer_online_decision_name(int kind);

#endif
