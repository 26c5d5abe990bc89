/* Internal interfaces of the planner core: option sets and cost models per operation type,
 * the schedule DAG in activity-on-arc form, critical paths, and the lower-bounded max flow.
 * Module prefixes: prs__model_ (options/cost models), prs__graph_ (graph), prs__flow_ (flow). */
#ifndef PRS_PLAN_INT_H
#define PRS_PLAN_INT_H

#include <stdint.h>

#include "perseus/evaluate.h"
#include "perseus/planner.h"

/* Record an error and yield its code. prs_error_set returns the code too, but from another
 * translation unit, where the static analyser cannot see it; this form lets it follow the
 * failure paths. */
#define FAIL(err, code, ...) (prs_error_set((err), (code), __VA_ARGS__), (code))

/* ---- Operation types: (stage, instruction), docs/planner.md, 'Options', 'Exponential fit' ---- */

typedef enum prs__model_kind { PRS__MODEL_EXP = 0, PRS__MODEL_HULL = 1 } prs__model_kind;

/* A candidate execution option of an operation type. */
typedef struct prs__model_cand {
    long q;          /* quantized time, units of tau */
    int freq_mhz;    /* knob written into plans */
    double time_s;   /* measured */
    double energy_j; /* measured */
    double cost_j;   /* effective: energy - P_block * q * tau */
} prs__model_cand;

typedef struct prs__model_optype {
    int stage;
    prs_instr instr;
    prs__model_kind kind; /* model actually used (exp may fall back to hull) */
    int ncand;
    prs__model_cand *cand; /* ascending q */
    long q_min, q_max;
    double a, b, c; /* exp coefficients (kind == PRS__MODEL_EXP) */
    /* Tables over d in [q_min, q_max], index d - q_min. */
    double *cost; /* C(d): predicted effective energy of one computation */
    double *up;   /* u(d): cost of shortening by one unit (d > q_min) */
    double *down; /* l(d): saving from lengthening by one unit (d < q_max) */
    int *knob;    /* frequency for duration d */
} prs__model_optype;

/* Options for one operation type from profile rows (exp: the reference's filter and fit, with a
 * fallback to hull when the fit is impossible; hull: lower convex hull of effective costs).
 * fallback is set to 1 when an exp type fell back to hull (msg then holds the reason). */
int prs__model_build(const prs_profile *p, int stage, prs_instr instr, const prs_plan_opts *o,
                     prs__model_optype *out, int *fallback, prs_error *err);
/* Same, reusing the fit of an earlier type in done[0..ndone) whose candidates are identical
 * (pipeline stages are often copies of each other; the fit is the costly part). */
int prs__model_build_memo(const prs_profile *p, int stage, prs_instr instr, const prs_plan_opts *o,
                          const prs__model_optype *done, int ndone, prs__model_optype *out,
                          int *fallback, prs_error *err);
void prs__model_free(prs__model_optype *t);

/* The reference's candidate filter (docs/planner.md, 'Options'), exposed for tests.
 * rows: the (stage, instruction) rows; filter: dominance by measured energy (artifact) or by
 * effective cost (zeus). Writes up to nrows candidates sorted by q descending, returns their
 * count. */
int prs__model_reference_candidates(const prs_profile_row *const *rows, int nrows, double unit_s,
                                    double p_block_w, int always_noise, prs_option_filter filter,
                                    prs__model_cand *out);

/* Fit C(d) = a exp(b d) + c to (q, cost) points the way the reference does (MINPACK lmdif, grid
 * of 54 starts, least MSE among accepted fits). 0 on success, PRS_EFIT if no start is accepted. */
int prs__model_fit_exp(const prs__model_cand *cand, int n, double unit_s, double *a, double *b,
                       double *c);

/* Quantize a measured time: Python's t // tau (docs/planner.md, 'Options'); -1 when that is
 * not a count of units in [0, PRS_MAX_TIME_UNITS] (a unit far too small for the time). */
long prs__model_quantize(double time_s, double unit_s);

/* ---- Schedule DAG, activity-on-arc form (docs/planner.md, 'Schedule DAG') ---- */

/* Arc of the AOA graph: op >= 0 is the computation (index into the plan: stage * ops_per_stage +
 * position), op < 0 a dummy arc of duration 0. */
typedef struct prs__graph_arc {
    int from, to;
    int op;
} prs__graph_arc;

/* The other end of an arc seen from one node, and the arc's op (< 0: a dummy). */
typedef struct prs__graph_end {
    int node, op;
} prs__graph_end;

typedef struct prs__graph_graph {
    int nops; /* stages * ops_per_stage */
    int ops_per_stage;
    int *op_type;  /* per op: index of its operation type (chunk * 2 + instr) */
    int *op_mb;    /* per op: microbatch */
    int *op_chunk; /* per op: model chunk (profile stage) */
    int nnodes, narcs;
    int source, sink; /* AOA node ids */
    prs__graph_arc *arcs;
    int *op_arc;               /* per op: its arc */
    int *topo;                 /* AOA nodes in topological order */
    int *out_start, *out_arcs; /* CSR of out-arcs */
    int *in_start, *in_arcs;   /* CSR of in-arcs */
    /* For prs__graph_cpm: per topological position i, the in-arcs of topo[i] as (from, op) at
     * cpm_in[k], k in [cpm_in_start[i], cpm_in_start[i + 1]); the out-arcs of
     * topo[nnodes - 1 - i] likewise as (to, op) in cpm_out. */
    int *cpm_in_start, *cpm_out_start;
    prs__graph_end *cpm_in, *cpm_out;
    int *cpm_out_arc; /* the arc of each cpm_out entry */
} prs__graph_graph;

int prs__graph_build(const prs_pipeline *pipe, prs__graph_graph *g, prs_error *err);

/* Set-up checkpoints of a planning run (docs/planner.md, 'Progress and cancelling'): the run's
 * progress callback, called with done = total = 0 between the passes of its set-up, each at
 * most linear in the size of the schedule graph, so that a caller can stop it before the walk
 * starts. */
typedef struct prs__tick {
    prs_progress_fn fn; /* NULL: no checkpoints */
    void *ud;
} prs__tick;

/* Whether the set-up is to stop: t->fn(t->ud, 0, 0) answered non-zero (never for a NULL t or
 * fn). */
int prs__tick_stop(const prs__tick *t);
/* prs__graph_build with a checkpoint after each GPU's computations and between its passes:
 * PRS_ECANCELED when one asks to stop (tick may be NULL). */
int prs__graph_build_ticked(const prs_pipeline *pipe, const prs__tick *tick, prs__graph_graph *g,
                            prs_error *err);
void prs__graph_free(prs__graph_graph *g);

/* pipeline.c: the options prs_plan refuses before any work (PRS_EINVAL naming the field); the
 * profile is not looked at. */
int prs__plan_opts_check(const prs_plan_opts *o, prs_error *err);
/* pipeline.c: GPU s's computations in execution order (2 * microbatches * virtual stages of
 * each array; chunk may be NULL). The pipeline must pass prs_pipeline_check. */
void prs__sched_stage_order(const prs_pipeline *pipe, int s, prs_instr *instr, int *mb, int *chunk);

/* Longest path with op durations dur[op] (dummies 0): fills earliest[] and latest[] (per AOA
 * node; latest may be NULL) and returns the critical path length. */
long prs__graph_cpm(const prs__graph_graph *g, const long *dur, long *earliest, long *latest);
/* The same with both times, and crit[arc] = 1 for the critical arcs (earliest at the tail plus
 * the duration is the latest at the head), 0 for the others. */
long prs__graph_cpm_crit(const prs__graph_graph *g, const long *dur, long *earliest, long *latest,
                         unsigned char *crit);

/* ---- Max flow with lower bounds, min cut (docs/planner.md, 'Iteration loop') ---- */

typedef struct prs__flow_net prs__flow_net;

prs__flow_net *prs__flow_new(int max_nodes, int max_arcs);
void prs__flow_free(prs__flow_net *n);
/* Start a problem on nodes 0..nnodes-1 (source s, sink t). */
void prs__flow_reset(prs__flow_net *n, int nnodes, int s, int t);
/* Add arc with flow bounds [lb, ub] (ub may be INFINITY) and a starting flow (clamped into the
 * bounds; any value works, a good one saves work); returns its id (0, 1, 2, ...). */
int prs__flow_add(prs__flow_net *n, int from, int to, double lb, double ub, double flow);
/* After a successful prs__flow_min_cut: new bounds for an arc, which keeps its flow (clamped
 * into them); the next solve starts from the last one's flows, residual supplies included, so
 * only the arcs whose bounds changed need this call. */
void prs__flow_rebound(prs__flow_net *n, int arc, double lb, double ub);
/* After prs__flow_min_cut: the flow on arc id, within its bounds. It is meant as a later
 * solve's starting flow; on its own it need not be conserved at every node (the solver's
 * supply arcs carry the difference). */
double prs__flow_flow(const prs__flow_net *n, int arc);
/* Solve. Writes side[v] = 1 for nodes on the source side of the source-minimal min cut
 * (reachable from s in the final residual graph through capacity > eps; an eps below
 * PRS_FLOW_AUG_EPS counts as that, since no thinner residual is augmented either). Returns 0, or
 * PRS_ERANGE when no finite cut exists (an s-t path of infinite capacity), or PRS_EINFEASIBLE
 * when the minimum cut is negative (the lower bounds admit no s-t flow; the planner's networks,
 * with lb <= ub from convex costs, never are). */
int prs__flow_min_cut(prs__flow_net *n, double eps, unsigned char *side);
/* The searches of every solve since prs__flow_new into st (its level_* and cut_* counters). */
void prs__flow_count(const prs__flow_net *n, prs_plan_stats *st);

/* ---- Exact evaluation (evaluate.c) ---- */

/* Measured (quantized time, energy) of every profiled clock of every operation type. */
typedef struct prs__table_table {
    int ntypes;       /* chunks * 2 */
    int *start;       /* per type: first entry; start[ntypes] = total */
    int *freq;        /* ascending within a type */
    long *q;          /* quantized time, units of tau */
    long *qc;         /* quantized time after a clock change: time + the change cost; q when
                       * changes are free (docs/planner.md, 'Clock changes') */
    double *time_s;   /* measured */
    double *energy_j; /* measured */
} prs__table_table;

int prs__table_build(const prs_profile *p, const prs_pipeline *pipe, prs__table_table *t,
                     prs_error *err);
void prs__table_free(prs__table_table *t);
/* Index of (type, freq) in the table, or -1 if that clock was not profiled. */
int prs__table_find(const prs__table_table *t, int type, int freq_mhz);
/* Iteration energy from the per-op quantized times and energies and the critical path T:
 * sum(e) + P_block * (stages * T - sum(q)) * tau. */
double prs__table_energy(const prs_pipeline *pipe, long T, double sum_energy_j, long sum_q);

/* The evaluation context (perseus/evaluate.h): the DAG, the table, and scratch per op / node. */
struct prs_eval {
    prs_pipeline pipe;
    prs__graph_graph g;
    prs__table_table t;
    long *dur;           /* per op: quantized time of its clock in the last evaluation */
    long *earliest;      /* per AOA node */
    long *latest;        /* per AOA node (prs_eval_windows) */
    int *idx;            /* per op: table entry of its clock (prs__table_lookup) */
    double sum_energy_j; /* of the last prs__table_lookup */
    long sum_q;          /* of the last prs__table_lookup */
};

/* prs_eval_open with set-up checkpoints (tick may be NULL): PRS_ECANCELED when one asks to
 * stop. */
int prs__eval_open_ticked(const prs_profile *profile, const prs_pipeline *pipe,
                          const prs__tick *tick, prs_eval **out, prs_error *err);
/* Table entries of every op's clock into ev->idx, durations into ev->dur (a computation after
 * a clock change: its qc entry), and the sums of measured energies and quantized times (q,
 * without the changes: they are spent at blocking power). PRS_EINVAL naming the first clock
 * not profiled. */
int prs__table_lookup(prs_eval *ev, const int *clocks_mhz, prs_error *err);
/* After prs__table_lookup: the critical path in units (ev->earliest filled) and the iteration
 * energy. */
long prs__table_run(prs_eval *ev, double *energy_j);

/* Whether computation op runs after a clock change in the plan clocks (one per op): its clock
 * differs from the one before it on its GPU, the GPU's first computation compared with its last
 * (docs/planner.md, 'Clock changes'). */
static inline int prs__op_changes(const prs__graph_graph *g, const int *clocks, int op)
{
    int pos = op % g->ops_per_stage;
    return clocks[op] != clocks[pos ? op - 1 : op + g->ops_per_stage - 1];
}

/* ---- Clock change costs (changecost.c) ---- */

/* Merge the clocks of neighbouring computations on a GPU where a change costs more than it
 * saves (docs/planner.md, 'Clock changes'): a run of equal clocks takes its left or right
 * neighbour's clock when the plan's evaluation with change costs is no slower and no costlier
 * (ties: the merge, which makes fewer changes), until no run can. clocks is changed in place;
 * *T and *energy_j (may be NULL) get its evaluated figures. Does nothing but evaluate when
 * changes are free. Fails as prs__table_lookup. */
int prs__changes_merge(prs_eval *ev, int *clocks, long *T, double *energy_j, prs_error *err);
/* Slack reclaiming with the change costs (changereclaim.c): each computation in turn takes the
 * profiled clock that saves the most effective energy and fits the plan's schedule, its change
 * and the next computation's counted; the evaluated time never grows. clocks changed in place;
 * *T, *energy_j (may be NULL): the result's figures. Fails as prs__table_lookup. */
int prs__changes_reclaim(prs_eval *ev, int *clocks, long *T, double *energy_j, prs_error *err);
/* Every plan of *f through prs__changes_merge, with its evaluated figures updated (the planned
 * ones stay the walk's); where the changes made a plan slower than its evaluated time without
 * them, also a copy sped up toward that time (merges toward the faster clock at every change on
 * the critical path): *f keeps the one no faster plan beats. With clean, the other plans (those
 * copies and *tracks', merged too) go to *tracks (created when NULL), for the cleaning.
 * tick (may be NULL): its progress callback gets (total, total) every few points, and a non-zero
 * answer stops the passes with PRS_ECANCELED. Nothing when changes are free. */
int prs__changes_frontiers(prs_eval *ev, prs_frontier **f, prs_frontier **tracks, int clean,
                           const prs__tick *tick, long total, prs_error *err);

/* ---- Slack reclaiming (refine.c) ---- */

typedef struct prs__refine_refiner prs__refine_refiner;

prs__refine_refiner *prs__refine_new(const prs__graph_graph *g, const prs__table_table *ev,
                                     const prs_pipeline *pipe);
void prs__refine_free(prs__refine_refiner *rf);
/* Table entries (prs__table_table indices) of the clocks in freq, one per op, into idx.
 * PRS_EINVAL if a clock is not profiled. */
int prs__refine_entries(const prs__refine_refiner *rf, const int *freq, int *idx);
/* Improve a plan of table entries within budget units: when by_rate, first reclaim slack by
 * rate (repeatedly move the computation whose next slower clock saves the most effective
 * energy per unit of time and still fits); then replace every clock by the cheapest one, in
 * effective energy, that keeps the critical path within the budget (a backward and a forward
 * pass; no op gets costlier). earliest: the earliest times (per AOA node) of idx's plan when
 * the caller has them, else NULL. The result goes to out (may be idx) with its evaluated
 * critical path *T and energy. PRS_EINVAL if the plan already exceeds the budget. */
int prs__refine_plan(prs__refine_refiner *rf, const int *idx, const long *earliest, long budget,
                     int by_rate, int *out, long *T, double *energy_j);
/* How prs__refine_track rounds a relaxed plan along its schedule. */
typedef enum prs__track_mode {
    PRS__TRACK_CHEAPEST = 0,    /* forward, each computation at its cheapest clock that fits */
    PRS__TRACK_PRICED = 1,      /* forward, at the clock cheapest once its time is priced */
    PRS__TRACK_PRICED_BACK = 2, /* the same backward, from the end of the schedule */
    PRS__TRACK_MODES = 3
} prs__track_mode;

/* Round a relaxed plan (durations in units per op, relaxed) to clocks that keep its schedule.
 * Forward: in topological order, each computation starts when the rounded plan's predecessors
 * end and takes a clock that ends by the relaxed plan's event at its head. Backward: in reverse
 * order, each ends when the rounded plan's successors start (latest times against the budget)
 * and takes a clock that starts no earlier than the relaxed plan's latest event at its tail.
 * Among the clocks that fit: the cheapest (PRS__TRACK_CHEAPEST), or the one with the least
 * effective energy + price[op] * q (price: per op, the relaxation's price of a unit of time at
 * its relaxed duration; a computation that ends early, or starts late, leaves the time to its
 * neighbours). Then the two passes of prs__refine_plan within budget. Result as
 * prs__refine_plan; PRS_EINVAL if the rounded plan exceeds the budget (never when the relaxed
 * plan fits it) or a relaxed duration is faster than every clock. */
int prs__refine_track(prs__refine_refiner *rf, const long *relaxed, prs__track_mode mode,
                      const double *price, long budget, int *out, long *T, double *energy_j);
/* Adds what the refiner did since prs__refine_new to st (reclaims, reclaim_moves, tracks). */
void prs__refine_count(const prs__refine_refiner *rf, prs_plan_stats *st);

#endif
