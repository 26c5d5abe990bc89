/* The plan a planner iteration emits (pick.c): the relaxed plan's clocks evaluated exactly, and
 * in hull mode turned into a cheaper real plan (docs/planner.md, 'From the relaxed plan to
 * clocks'). One context per thread; the shared inputs are only read. Module prefix prs__pick_. */
#ifndef PRS_PICK_H
#define PRS_PICK_H

#include "plan_int.h"

/* What every context reads and nobody writes while they exist. */
typedef struct prs__pick_shared {
    const prs__graph_graph *g;
    const prs__table_table *table;
    const prs_pipeline *pipe;
    const prs__model_optype *types; /* per type: the predicted costs and, in hull mode, the
                                     * slopes (prices) */
    int hull;                       /* refine (hull mode); else the rounded plan is emitted */
    int tracks;                     /* hull, clean frontier: also round along the schedule */
    int timed;                      /* time the picks (prs__pick_count's pick_s) */
} prs__pick_shared;

typedef struct prs__pick_ctx prs__pick_ctx;

/* One point's plans. cost: the relaxed plan's predicted effective cost; best: table entries per
 * op (nops); extra[m]: the rounding of mode m is a point of its own, its plan x_idx[m] with
 * x_t[m], x_e[m]. */
typedef struct prs__pick_out {
    double cost;
    int *best;
    long t;
    double e;
    int extra[PRS__TRACK_MODES];
    int *x_idx[PRS__TRACK_MODES];
    long x_t[PRS__TRACK_MODES];
    double x_e[PRS__TRACK_MODES];
} prs__pick_out;

/* NULL when out of memory. */
prs__pick_ctx *prs__pick_new(const prs__pick_shared *sh);
void prs__pick_free(prs__pick_ctx *c);
/* The plan for relaxed durations dur (per op) at planned critical path `planned` (units), whose
 * clocks are the table entries idx. fresh: idx differs from the last call's (or this context
 * has not seen it); else the results that depend on idx alone are reused. idx must stay valid
 * until the next fresh call. */
void prs__pick_point(prs__pick_ctx *c, const int *idx, int fresh, const long *dur, long planned,
                     prs__pick_out *out);
/* Adds what the context did to st (evaluations, reclaims, reclaim_moves, tracks). */
void prs__pick_count(const prs__pick_ctx *c, prs_plan_stats *st);

#endif
