/* The monitor's per-GPU energy history and its window edges (perseus/monitor.h), internal to the
 * client. No threads here: monitor.c feeds a track from its GPU's sampler under its own lock.
 *
 * A track is the counter's values at known instants, (t, E) points in time order: energy samples
 * with their brackets narrowed by the refresh fit (refresh.h), or, in power mode, the integral of
 * power readings (trapezoids between their bracket midpoints). Each point has a sequence number
 * (its index since the track began), so two edges can tell how many points lie between them.
 *
 * An edge (a window's begin or end, a mark) at instant t falls inside one counter interval
 * [a, b]; its energy E(t) splits the interval's exact energy E_b - E_a in proportion to
 * P_prev (t - a) : P_next (b - t), P_prev and P_next being the mean powers of the intervals just
 * before a and just after b. That is exact when the power is steady on each side of the edge,
 * which is the case a window is made for: the work starts at begin and stops at end. Without
 * P_prev (the track's first interval) the split is linear. */
#ifndef PRS_CLIENT_MONITOR_INT_H
#define PRS_CLIENT_MONITOR_INT_H

#include <stddef.h>

#include "refresh.h"

typedef struct prs__mon_point {
    double t_s, e_j;
} prs__mon_point;

typedef struct prs__mon_track {
    prs__mon_point *pts;
    size_t n, cap;
    long long base_seq; /* sequence number of pts[0] */
    prs__client_refresh fit;
    int power_mode;
    double last_power_w; /* power mode: the previous reading (NAN before the first) */
    double last_hi_s;    /* energy mode: the previous sample's bracket end */
} prs__mon_track;

typedef struct prs__mon_mark {
    double t_s;          /* the edge's instant, CLOCK_MONOTONIC */
    int resolved;        /* e_j, estimate and after_seq are set */
    int estimate;        /* resolved without the counter passing it (forced) */
    double e_j;          /* the counter's value at t_s, by the split above */
    long long after_seq; /* sequence number of the first point after t_s */
} prs__mon_mark;

void prs__mon_track_init(prs__mon_track *k, int power_mode);
void prs__mon_track_free(prs__mon_track *k);
/* Feed one sample of the GPU's sampler (sampler.h), in the order the sampler gave them: the
 * counter's value (energy mode) or the power (power mode) at an instant of [t_lo, t_hi].
 * Samples that go backwards in time or value are ignored. PRS_ENOMEM. */
int prs__mon_track_add(prs__mon_track *k, double t_lo, double t_hi, double value);
/* Resolve mark m from the points so far: 1 when resolved (or already), 0 when the counter has not
 * moved twice past it yet. force: resolve anyway with what there is (flagged estimate when the
 * points after it are missing); returns 0 only with no point at all. */
int prs__mon_track_resolve(const prs__mon_track *k, prs__mon_mark *m, int force);
/* Forget points no unresolved mark at or after keep_t_s needs (INFINITY: none is pending; the
 * last three points are kept for marks to come). */
void prs__mon_track_prune(prs__mon_track *k, double keep_t_s);
/* The counter's interval: the fitted refresh period, else the mean gap of the recent points;
 * 0 when unknown. */
double prs__mon_track_period(const prs__mon_track *k);

#endif
