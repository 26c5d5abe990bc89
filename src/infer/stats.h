/* What the serving emulator measures (stats.c): latency distributions per class and the
 * cluster's power over time, in bounded memory whatever the trace's length.
 *
 * Latencies go to log-spaced histograms (PRS_INFER_HIST_PER_DECADE bins a decade from 10 us to
 * 10^4 s): a quantile is exact to the bin, i.e. within 1.2 % relative. Energy goes to bins of
 * bin_s seconds (a 7-day run at 1 s: 605 k doubles), from which the cluster's power over time and
 * its percentiles come. */
#ifndef PRS_INFER_STATS_H
#define PRS_INFER_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "classes.h"
#include "perseus/error.h"

#define PRS_INFER_HIST_PER_DECADE 200
#define PRS_INFER_HIST_DECADES 9
#define PRS_INFER_HIST_MIN_S 1e-5 /* 10^-5: stats.c's bin formula adds 5 decades */
#define PRS_INFER_HIST_BINS (PRS_INFER_HIST_PER_DECADE * PRS_INFER_HIST_DECADES + 2)

typedef struct prs_infer_hist {
    uint64_t bins[PRS_INFER_HIST_BINS]; /* [0]: below the minimum, [last]: above the maximum */
    uint64_t n;
    double max_s;
    double sum_s;
} prs_infer_hist;

void prs__infer_hist_add(prs_infer_hist *h, double x_s, uint64_t count);
/* The bin of x_s, and adding to a bin known already (one logarithm for many histograms). */
size_t prs__infer_hist_bin(double x_s);
void prs__infer_hist_add_at(prs_infer_hist *h, size_t bin, double x_s, uint64_t count);
/* The q-quantile (q in [0, 1]): the upper edge of the bin holding it, clamped to the largest
 * value seen. 0 when empty. */
double prs__infer_hist_quantile(const prs_infer_hist *h, double q);

/* The distribution function: for each non-empty bin, its upper edge (clamped to the largest value
 * seen) in x_s and the share of values up to it in share (both PRS_INFER_HIST_BINS long).
 * Returns the number of points (0 when empty); the last share is 1. */
size_t prs__infer_hist_cdf(const prs_infer_hist *h, double *x_s, double *share);

/* Latency statistics per class, [PRS_INFER_ALL] for all requests. */
typedef struct prs_infer_latency {
    prs_infer_hist ttft[PRS_INFER_NCLASS + 1];
    prs_infer_hist tbt[PRS_INFER_NCLASS + 1]; /* every inter-token gap */
    uint64_t done[PRS_INFER_NCLASS + 1];      /* requests finished */
    uint64_t late[PRS_INFER_NCLASS + 1];      /* finished past the TTFT SLO or the TBT SLO on
                                               * average over their tokens */
} prs_infer_latency;

/* Energy per time bin: the cluster's power over time. */
typedef struct prs_infer_meter {
    double bin_s;
    double *energy_j; /* n bins, bin k covering [k*bin_s, (k+1)*bin_s) */
    size_t n;
    double total_j;
} prs_infer_meter;

/* Bins for [0, horizon_s) (energy past it lands in the last bin). */
int prs__infer_meter_init(prs_infer_meter *m, double bin_s, double horizon_s, prs_error *err);
void prs__infer_meter_free(prs_infer_meter *m);
/* energy_j spent evenly over [t0_s, t1_s] (t1_s >= t0_s; a point when equal). */
void prs__infer_meter_add(prs_infer_meter *m, double t0_s, double t1_s, double energy_j);
/* The q-quantile of the power of the bins in [0, until_s) (watts). */
double prs__infer_meter_power_quantile(const prs_infer_meter *m, double until_s, double q);

#endif
