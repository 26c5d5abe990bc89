/* The frontier object, shared by planner.c (which fills it) and frontier_io.c (save/load). */
#ifndef PRS_FRONTIER_INT_H
#define PRS_FRONTIER_INT_H

#include <stddef.h>

#include "perseus/planner.h"

/* Plans are stored compactly: the initial all-slowest plan (never emitted itself) and, per
 * emitted point k, the computations whose clock changed relative to point k-1. */
struct prs_frontier {
    prs_pipeline pipe;
    prs_cost_model model;
    int nops;
    int *base;
    size_t npoints, cap_points;
    prs_frontier_point *pts;
    size_t *dstart; /* npoints + 1 offsets into dop/dfreq */
    size_t ndelta, cap_delta;
    int *dop, *dfreq;
};

prs_frontier *prs__frontier_new(const prs_pipeline *pipe, prs_cost_model model, const int *base);
/* Append a point with its changes; 0 or PRS_ENOMEM. */
int prs__frontier_push(prs_frontier *f, const prs_frontier_point *pt, const int *ops,
                       const int *freqs, size_t nchanges);
/* The clean frontier (prs_frontier_clean) of the points of nf >= 1 frontiers of one pipeline and
 * one starting plan (fs[0]'s): ties of time and energy go to the earlier frontier, then to the
 * earlier point. */
int prs__frontier_clean_union(const prs_frontier *const *fs, size_t nf, prs_frontier **out,
                              prs_error *err);

#endif
