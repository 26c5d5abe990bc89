/* Internal interfaces of the planner core: option sets and cost models per operation type,
 * the schedule DAG in activity-on-arc form, critical paths, and the lower-bounded max flow.
 * Module prefixes: prsO_ (options/cost models), prsG_ (graph), prsF_ (flow). */
#ifndef PRS_PLAN_INT_H
#define PRS_PLAN_INT_H

#include <stdint.h>

#include "perseus/evaluate.h"
#include "perseus/planner.h"

/* ---- Operation types: (stage, instruction), docs/planner.md, 'Options', 'Exponential fit' ---- */

typedef enum prsO_kind { PRSO_EXP = 0, PRSO_HULL = 1 } prsO_kind;

/* A candidate execution option of an operation type. */
typedef struct prsO_cand {
    long q;          /* quantized time, units of tau */
    int freq_mhz;    /* knob written into plans */
    double time_s;   /* measured */
    double energy_j; /* measured */
    double cost_j;   /* effective: energy - P_block * q * tau */
} prsO_cand;

typedef struct prsO_optype {
    int stage;
    prs_instr instr;
    prsO_kind kind; /* model actually used (exp may fall back to hull) */
    int ncand;
    prsO_cand *cand; /* ascending q */
    long q_min, q_max;
    double a, b, c; /* exp coefficients (kind == PRSO_EXP) */
    /* Tables over d in [q_min, q_max], index d - q_min. */
    double *cost; /* C(d): predicted effective energy of one computation */
    double *up;   /* u(d): cost of shortening by one unit (d > q_min) */
    double *down; /* l(d): saving from lengthening by one unit (d < q_max) */
    int *knob;    /* frequency for duration d */
} prsO_optype;

/* Options for one operation type from profile rows (exp: the reference's filter and fit, with a
 * fallback to hull when the fit is impossible; hull: lower convex hull of effective costs).
 * fallback is set to 1 when an exp type fell back to hull (msg then holds the reason). */
int prsO_build(const prs_profile *p, int stage, prs_instr instr, const prs_plan_opts *o,
               prsO_optype *out, int *fallback, prs_error *err);
/* Same, reusing the fit of an earlier type in done[0..ndone) whose candidates are identical
 * (pipeline stages are often copies of each other; the fit is the costly part). */
int prsO_build_memo(const prs_profile *p, int stage, prs_instr instr, const prs_plan_opts *o,
                    const prsO_optype *done, int ndone, prsO_optype *out, int *fallback,
                    prs_error *err);
void prsO_free(prsO_optype *t);

/* The reference's candidate filter (docs/planner.md, 'Options'), exposed for tests.
 * rows: the (stage, instruction) rows. Writes up to nrows candidates sorted by q descending,
 * returns their count. */
int prsO_reference_candidates(const prs_profile_row *const *rows, int nrows, double unit_s,
                              double p_block_w, int always_noise, prsO_cand *out);

/* Fit C(d) = a exp(b d) + c to (q, cost) points the way the reference does (MINPACK lmdif, grid
 * of 54 starts, least MSE among accepted fits). 0 on success, PRS_EFIT if no start is accepted. */
int prsO_fit_exp(const prsO_cand *cand, int n, double unit_s, double *a, double *b, double *c);

/* Quantize a measured time: Python's t // tau (docs/planner.md, 'Options'). */
long prsO_quantize(double time_s, double unit_s);

/* ---- Schedule DAG, activity-on-arc form (docs/planner.md, 'Schedule DAG') ---- */

/* Arc of the AOA graph: op >= 0 is the computation (index into the plan: stage * ops_per_stage +
 * position), op < 0 a dummy arc of duration 0. */
typedef struct prsG_arc {
    int from, to;
    int op;
} prsG_arc;

typedef struct prsG_graph {
    int nops; /* stages * ops_per_stage */
    int ops_per_stage;
    int *op_type;  /* per op: index of its operation type (chunk * 2 + instr) */
    int *op_mb;    /* per op: microbatch */
    int *op_chunk; /* per op: model chunk (profile stage) */
    int nnodes, narcs;
    int source, sink; /* AOA node ids */
    prsG_arc *arcs;
    int *op_arc;               /* per op: its arc */
    int *topo;                 /* AOA nodes in topological order */
    int *out_start, *out_arcs; /* CSR of out-arcs */
    int *in_start, *in_arcs;   /* CSR of in-arcs */
} prsG_graph;

int prsG_build(const prs_pipeline *pipe, prsG_graph *g, prs_error *err);
void prsG_free(prsG_graph *g);

/* pipeline.c: GPU s's computations in execution order (2 * microbatches * virtual stages of
 * each array; chunk may be NULL). The pipeline must pass prs_pipeline_check. */
void prsS_stage_order(const prs_pipeline *pipe, int s, prs_instr *instr, int *mb, int *chunk);

/* Longest path with op durations dur[op] (dummies 0): fills earliest[] and latest[] (per AOA
 * node; latest may be NULL) and returns the critical path length. */
long prsG_cpm(const prsG_graph *g, const long *dur, long *earliest, long *latest);

/* ---- Max flow with lower bounds, min cut (docs/planner.md, 'Iteration loop') ---- */

typedef struct prsF_net prsF_net;

prsF_net *prsF_new(int max_nodes, int max_arcs);
void prsF_free(prsF_net *n);
/* Start a problem on nodes 0..nnodes-1 (source s, sink t). */
void prsF_reset(prsF_net *n, int nnodes, int s, int t);
/* Add arc with flow bounds [lb, ub] (ub may be INFINITY) and a starting flow (clamped into the
 * bounds; any value works, a good one saves work); returns its id (0, 1, 2, ...). */
int prsF_add(prsF_net *n, int from, int to, double lb, double ub, double flow);
/* After prsF_min_cut: the flow on arc id (whose lower bound was lb), within its bounds. It is
 * meant as the next solve's starting flow; on its own it need not be conserved at every node
 * (the solver's node-excess arcs carry the difference). */
double prsF_flow(const prsF_net *n, int arc, double lb);
/* Solve. Writes side[v] = 1 for nodes on the source side of the source-minimal min cut
 * (reachable from s in the final residual graph through capacity > eps). Returns 0, or
 * PRS_ERANGE when no finite cut exists (an s-t path of infinite capacity), or PRS_EINFEASIBLE
 * when the minimum cut is negative (the lower bounds admit no s-t flow; the planner's networks,
 * with lb <= ub from convex costs, never are). */
int prsF_min_cut(prsF_net *n, double eps, unsigned char *side);

/* ---- Exact evaluation (evaluate.c) ---- */

/* Measured (quantized time, energy) of every profiled clock of every operation type. */
typedef struct prsE_table {
    int ntypes;       /* chunks * 2 */
    int *start;       /* per type: first entry; start[ntypes] = total */
    int *freq;        /* ascending within a type */
    long *q;          /* quantized time, units of tau */
    double *time_s;   /* measured */
    double *energy_j; /* measured */
} prsE_table;

int prsE_build(const prs_profile *p, const prs_pipeline *pipe, prsE_table *t, prs_error *err);
void prsE_free(prsE_table *t);
/* Index of (type, freq) in the table, or -1 if that clock was not profiled. */
int prsE_find(const prsE_table *t, int type, int freq_mhz);
/* Iteration energy from the per-op quantized times and energies and the critical path T:
 * sum(e) + P_block * (stages * T - sum(q)) * tau. */
double prsE_energy(const prs_pipeline *pipe, long T, double sum_energy_j, long sum_q);

/* The evaluation context (perseus/evaluate.h): the DAG, the table, and scratch per op / node. */
struct prs_eval {
    prs_pipeline pipe;
    prsG_graph g;
    prsE_table t;
    long *dur;           /* per op: quantized time of its clock in the last evaluation */
    long *earliest;      /* per AOA node */
    long *latest;        /* per AOA node (prs_eval_windows) */
    int *idx;            /* per op: table entry of its clock (prsE_lookup) */
    double sum_energy_j; /* of the last prsE_lookup */
    long sum_q;          /* of the last prsE_lookup */
};

/* Table entries of every op's clock into ev->idx, durations into ev->dur, and the sums of
 * measured energies and quantized times. PRS_EINVAL naming the first clock not profiled. */
int prsE_lookup(prs_eval *ev, const int *clocks_mhz, prs_error *err);
/* After prsE_lookup: the critical path in units (ev->earliest filled) and the iteration energy. */
long prsE_run(prs_eval *ev, double *energy_j);

/* ---- Slack reclaiming (refine.c) ---- */

typedef struct prsP_refiner prsP_refiner;

prsP_refiner *prsP_new(const prsG_graph *g, const prsE_table *ev, const prs_pipeline *pipe);
void prsP_free(prsP_refiner *rf);
/* Replace clocks in freq (one per op, all profiled) by the cheapest ones, in effective energy,
 * that keep the critical path within budget units. No op gets costlier. PRS_EINVAL if a clock
 * is not profiled or the plan already exceeds the budget. */
int prsP_refine(prsP_refiner *rf, int *freq, long budget);

#endif
