/* Capacity of a serving configuration (capacity.c): for a request class (its length mix), a TP
 * degree and an SM clock, the highest Poisson arrival rate one instance serves within the SLOs,
 * and its power at fractions of that rate. Every policy sizes pools from this table.
 *
 * The rate is found by emulating one instance (engine.h) on a seeded Poisson load whose lengths
 * are drawn from the class's requests, doubling then bisecting the rate: a rate is feasible when
 * at most late_margin x (1 - quantile) of the requests are late (TTFT over its input class's SLO,
 * or a mean inter-token gap over the TBT SLO). The same seed at every rate makes the probe
 * deterministic. Why the mean gap and not each gap: without chunked prefill every prompt's prefill
 * stalls all running decodes, so the P99 of single gaps is a prefill time at any load above a few
 * requests a second; a request's mean gap is what its reader sees. */
#ifndef PRS_INFER_CAPACITY_H
#define PRS_INFER_CAPACITY_H

#include "classes.h"
#include "perf.h"
#include "trace.h"

#define PRS_INFER_MAX_TPS 4
#define PRS_INFER_MAX_CLOCKS 32
#define PRS_INFER_POWER_POINTS 4 /* power measured at 1/4, 2/4, 3/4 and all of the capacity */
#define PRS_INFER_MIXES (PRS_INFER_NCLASS + 1) /* the 9 classes, then every request together */

typedef struct prs_infer_cap_opts {
    long max_batched_tokens;
    int probe_requests; /* requests per probe (default 600) */
    double rel_tol;     /* bisection stops within this share of the rate (default 0.03) */
    int max_clocks;     /* clocks probed: this many spread over the backend's (default 6) */
    double late_margin; /* a probe is feasible when at most late_margin x (1 - quantile) of its
                         * requests are late (default 0.5: the replay's load is burstier and
                         * its instances switch clocks, so the probe keeps half the budget) */
    uint64_t seed;
} prs_infer_cap_opts;

void prs_infer_cap_opts_default(prs_infer_cap_opts *o);

/* One configuration's figures. */
typedef struct prs_infer_cap {
    double rate_rps;                        /* 0: the SLO cannot be met even at a trickle */
    double power_w[PRS_INFER_POWER_POINTS]; /* at (i+1)/4 of rate_rps */
    double idle_w;
} prs_infer_cap;

typedef struct prs_infer_captable {
    int tps[PRS_INFER_MAX_TPS], n_tps;
    int clocks[PRS_INFER_MAX_CLOCKS], n_clocks; /* ascending; the last is the maximum */
    prs_infer_cap cap[PRS_INFER_MIXES][PRS_INFER_MAX_TPS][PRS_INFER_MAX_CLOCKS];
    int has_mix[PRS_INFER_MIXES]; /* the mix had requests of its own (else lengths at the
                                   * middle of the class's range) */
} prs_infer_captable;

/* Fill t for every mix, TP and clock from the trace's lengths. O(mixes x TPs x clocks x probes).
 */
int prs_infer_captable_build(const prs_infer_perf *perf, const prs_infer_classes *classes,
                             const prs_infer_cap_opts *o, const prs_infer_trace *trace,
                             prs_infer_captable *t, prs_error *err);

/* The power of one instance of configuration c serving rate_rps (<= c->rate_rps): linear
 * between idle (rate 0) and the measured points. */
double prs_infer_cap_power(const prs_infer_cap *c, double rate_rps);

/* Probe one configuration on a length mix (exposed for the tests). */
int prs__infer_cap_probe(const prs_infer_perf *perf, const prs_infer_classes *classes,
                         const prs_infer_cap_opts *o, const prs_infer_trace *mix, int tp, int mhz,
                         prs_infer_cap *out, prs_error *err);

#endif
