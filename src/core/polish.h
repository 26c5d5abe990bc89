/* Polishing a real plan (polish.c): a local search that lowers its evaluated energy within a
 * time budget (docs/planner.md, 'Polishing'). One context per thread; the graph and table are
 * only read. Module prefix prs__polish_. */
#ifndef PRS_POLISH_H
#define PRS_POLISH_H

#include "plan_int.h"

/* Sweeps over every computation at most (each sweep costs a pass over the schedule's edges per
 * computation, and a critical-path pass per move). */
#define PRS_POLISH_MAX_SWEEPS 8
/* Computations a run visits between two checkpoints (prs__polish_set_tick). */
#define PRS_POLISH_TICK_OPS 1024
/* A move is taken when it saves more than this fraction of the plan's effective energy. */
#define PRS_POLISH_REL_TOL 1e-12

typedef struct prs__polish prs__polish;

/* NULL when out of memory. */
prs__polish *prs__polish_new(const prs__graph_graph *g, const prs__table_table *t,
                             const prs_pipeline *pipe);
void prs__polish_free(prs__polish *p);
/* Polish the plan of table entries idx (one per op, changed in place) within budget units: its
 * critical path stays within the budget and its effective energy never rises. *T and
 * *energy_j: the result's evaluated critical path and energy. PRS_EINVAL when the plan exceeds
 * the budget (idx unchanged); PRS_ECANCELED when a checkpoint asked to stop (idx then holds a
 * plan within the budget, *T and *energy_j unset). */
int prs__polish_run(prs__polish *p, int *idx, long budget, long *T, double *energy_j);
/* Checkpoints for the runs of p: tick's callback (tick or its fn NULL: none) gets (total, total)
 * every PRS_POLISH_TICK_OPS computations a run visits, and a non-zero answer stops the run. */
void prs__polish_set_tick(prs__polish *p, const prs__tick *tick, long total);
/* Polish the plans of *f (replaced by a new frontier): all, or the one prs_frontier_lookup(f, 0)
 * chooses; a plan is replaced only where it got cheaper, and a clean frontier is cleaned again
 * when one did. ev: the evaluation context of f's pipeline and profile. *moves: the moves taken
 * are added to it. tick (may be NULL): checkpoints as prs__polish_set_tick's, and one after each
 * plan; PRS_ECANCELED (f unchanged) when one asks to stop. */
int prs__polish_frontier(prs_eval *ev, prs_frontier **f, int all, int clean, const prs__tick *tick,
                         long total, long *moves, prs_error *err);
/* Moves taken since prs__polish_new. */
long prs__polish_moves(const prs__polish *p);

#endif
