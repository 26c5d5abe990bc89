/* Energy attribution from coarse counters (docs/measurement.md), internal to the client.
 *
 * One object per profiling round. The GPU runs computations of n_kinds kinds (kind = chunk * 2 +
 * instruction, all at the round's clock) and is otherwise blocked (waiting on communication or the
 * host). Each kind k draws an unknown constant power P_k while it runs and the GPU draws P_idle
 * when it runs none. The object is fed, on CLOCK_MONOTONIC seconds:
 *
 *   - the timeline: busy intervals (kind, t0, t1) in time order and not overlapping, and "the
 *     timeline is known up to t" (every moment before t outside a busy interval was idle);
 *   - readings: energy counter samples (E, [t_lo, t_hi]): the counter took the value E at an
 *     unknown instant of [t_lo, t_hi] (a sampler that sees a change between two polls gives the
 *     two poll times), or power samples (P, [t_lo, t_hi]); one kind of reading per object.
 *
 * Readings may arrive before the timeline that covers them (a sampler thread reads continuously,
 * busy intervals are known once the device's events resolve): they wait in a bounded queue and
 * become rows of a linear least-squares problem once the timeline reaches them:
 *
 *   counter row  between consecutive samples a, b:  E_b - E_a = sum_k P_k busy_k + P_idle idle
 *   power row    one sample:                        P = sum_k P_k share_k + P_idle share_idle
 *                                                   (instants: only brackets within one state)
 *
 * where busy_k is the busy time of kind k between the two readings and share_k the fraction of the
 * bracket kind k ran, both averaged over the readings' brackets: treating a bracket's midpoint as
 * the exact time would correlate the timing error with the regressors and bias the powers (by
 * several percent with 100 ms counter refreshes, docs/measurement.md).
 *
 * Counter rows are in joules, power rows in watts, unweighted. The solve (cminpack's qrfac with
 * column pivoting on unit-norm columns, then qrsolv) drops the unknowns no row saw; they come out
 * NAN. Memory is bounded: at most max_rows rows are kept; when the buffer is full it is folded into
 * its QR factor (n_kinds + 1 rows, the same least-squares problem up to a constant residual), so a
 * round of any length costs O(max_rows * (n_kinds + 1)) doubles plus the bounded queues.
 *
 * Not thread-safe: one thread feeds and solves (the sampler, sampler.h, hands readings over). The
 * timeline starts at the first time given (the t0 of the first busy interval, or the first known
 * time): earlier readings are dropped. */
#ifndef PRS_CLIENT_ATTRIB_H
#define PRS_CLIENT_ATTRIB_H

#include "perseus/error.h"

#define PRS__CLIENT_ATTRIB_MAX_KINDS 66 /* 2 * PRS_CLIENT_MAX_CHUNKS, other work, and tails */

/* Positive results of prs__client_attrib_solve (0 = usable). */
enum {
    PRS__CLIENT_ATTRIB_MORE = 1, /* not enough data yet: no rows, too few, or a standard error above
                                max_rel_se; feed more and solve again */
    PRS__CLIENT_ATTRIB_POOR = 2  /* enough rows but unusable: ill-conditioned (cond above max_cond)
                                or a power (not a lump kind's) came out <= 0 */
};

typedef struct prs__client_attrib_opts {
    int max_rows;       /* rows kept before folding; >= 2 * (n_kinds + 1) (default 512) */
    int max_pending;    /* readings waiting for the timeline; the oldest is dropped (4096) */
    int max_intervals;  /* busy intervals waiting for readings; beyond, the oldest are consumed
                           and later readings before them are dropped (16384) */
    double min_row_s;   /* counter rows shorter than this merge into the next one (0) */
    int power_averaged; /* 0: a power reading is the power at an unknown instant of its
                           bracket, dropped when the bracket spans a state change; 1: the mean
                           power over the bracket (kept, split by the states' shares) */
    int min_rows;       /* usable only with at least unknowns + min_rows rows (3) */
    double max_cond;    /* usable only below this condition estimate (1e4) */
    double max_rel_se;  /* usable only when every solved power's estimated standard error is
                           below this fraction of it (0.02); <= 0 disables the check */
} prs__client_attrib_opts;

typedef struct prs__client_attrib_quality {
    long rows;            /* rows in the fit (counter intervals or power samples) */
    long samples_used;    /* readings that made or closed a row */
    long samples_dropped; /* before the timeline, queue overflow, merged (min_row_s), counter
                             going backwards, power instants spanning a state change */
    int unknowns;         /* powers solved (observed kinds, plus idle when observed) */
    double cond;          /* condition estimate of the column-scaled system (|r_11| / |r_nn|) */
    double rms;           /* residual root mean square (J per counter row, W per power row) */
    double max_rel_se;    /* largest standard error / power over the solved powers */
    double kind_se_w[PRS__CLIENT_ATTRIB_MAX_KINDS]; /* standard error estimates (NAN: not solved) */
    double idle_se_w;
    double kind_busy_s[PRS__CLIENT_ATTRIB_MAX_KINDS]; /* busy time in rows (power: sum of shares;
                                                         a lump kind: lumps) */
    double idle_s;
    double lump_s;          /* of idle_s, the time inside lumps */
    double lump_power_w;    /* the lumps fitted as one power over their spans, idle included, when
                               nearly all the idle time lies inside them (the blocking power is then
                               NAN: a lump's energy and the idle power cannot be told apart); else
                               NAN */
    int pending, intervals; /* readings and busy intervals queued now (memory in use) */
    char why[96];           /* "" when usable, else why not */
} prs__client_attrib_quality;

typedef struct prs__client_attrib prs__client_attrib;

void prs__client_attrib_opts_init(prs__client_attrib_opts *o);
/* n_kinds in 1..PRS__CLIENT_ATTRIB_MAX_KINDS; o NULL: defaults. PRS_EINVAL or PRS_ENOMEM. */
int prs__client_attrib_new(int n_kinds, const prs__client_attrib_opts *o, prs__client_attrib **out);
void prs__client_attrib_free(prs__client_attrib *a);

/* Kind `kind` ran over [t0, t1]; the timeline is known up to t1. PRS_EINVAL when kind is out of
 * range, t1 < t0, or t0 is before the known timeline (more than 1 ns: rounding is clamped). */
int prs__client_attrib_busy(prs__client_attrib *a, int kind, double t0, double t1);
/* Nothing but the busy intervals given happened before t. A t before the known timeline is a
 * no-op; not finite: PRS_EINVAL. */
int prs__client_attrib_known(prs__client_attrib *a, double t);
/* What the GPU did over [t0, t1] is unknown (work that was not tracked): readings whose
 * bracket, or whose row (from the reading before), overlaps it make no row; the timeline is
 * known up to t1 again. PRS_EINVAL when not finite or t1 < t0; a span before the known timeline
 * is clamped to it. */
int prs__client_attrib_unknown(prs__client_attrib *a, double t0, double t1);
/* Over [t0, t1] the GPU ran one piece of kind `kind`'s work, at an instant nobody knows, and was
 * blocked for the rest: a lump (an iteration's tail after its last computation: the wait for the
 * all-reduce, then an optimizer step the hooks did not see). Every lump of a kind adds the same
 * energy beyond the idle power's over its span, so the kind's unknown is joules a lump, not watts:
 * the span counts as idle time and the lump as 1 in the kind's column. Readings whose bracket
 * overlaps the span (inside it the energy so far is unknown) close no row: the row runs on to the
 * next reading. A kind is either busy or lump kind, never both; a lump kind's result may be any
 * sign and is left out of the usability checks (its standard error is reported). When nearly
 * all the idle time lies inside lumps, the lumps are one power instead (quality.lump_power_w) and
 * the lump kinds and the idle power come out NAN. PRS_EINVAL as for prs__client_attrib_busy, or
 * when the kind ran busy intervals. */
int prs__client_attrib_lump(prs__client_attrib *a, int kind, double t0, double t1);
/* The energy counter took the value energy_j at an instant of [t_lo, t_hi] (t_lo == t_hi: known
 * exactly). Brackets must come in order: PRS_EINVAL when t_hi < t_lo, t_lo is before the previous
 * reading's t_hi, a value is not finite, or power samples were given. */
int prs__client_attrib_energy(prs__client_attrib *a, double t_lo, double t_hi, double energy_j);
/* The GPU drew power_w over [t_lo, t_hi] (or at an unknown instant of it). Same rules; PRS_EINVAL
 * after energy samples. */
int prs__client_attrib_power(prs__client_attrib *a, double t_lo, double t_hi, double power_w);

/* Solve with the rows so far (may be called again later). kind_power_w gets n_kinds powers, NAN
 * for kinds no row saw; *idle_power_w NAN when no idle time was seen; q (may be NULL) the
 * figures above. Returns 0 when usable, PRS__CLIENT_ATTRIB_MORE or PRS__CLIENT_ATTRIB_POOR (outputs
 * still written when a solution exists, NAN otherwise), PRS_ENOMEM. */
int prs__client_attrib_solve(prs__client_attrib *a, double *kind_power_w, double *idle_power_w,
                             prs__client_attrib_quality *q);

#endif
