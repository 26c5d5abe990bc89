/* The GPU's energy counter (or power draw) sampled by a thread of its own (docs/measurement.md),
 * internal to the client.
 *
 * Energy mode: the thread reads the cumulative energy counter about every poll_s and keeps a
 * sample only when the value changed: the counter (which a real GPU refreshes only every 10-100
 * ms) took its new value somewhere between the previous read and this one (the middle of each
 * call), and that bracket is what the sample carries (its midpoint is the best single time). Poll
 * instants are dithered (each gap uniform in [0.5, 1.5] x poll_s) so that refresh instants fall
 * anywhere in a bracket, never at one fixed offset: averaging over the bracket (attrib.h) is then
 * unbiased. A read can cost milliseconds of a busy CPU (an H100: about 3 ms, refreshed every 100
 * ms): such reads never take more than half the time, and once the thread's own fit of the
 * refresh instants (refresh.h) has a period, it sleeps between refreshes and polls only from
 * shortly before the next one it predicts until the value changes. Cheap reads are polled as
 * above.
 *
 * Power mode, chosen at start when the energy counter cannot be read (GPUs before Volta): the
 * thread reads the power draw about every power_poll_s (dithered the same way) and keeps each
 * reading, bracketed by the call's start and end, unless the call was held up past 3 times its
 * usual cost (its value's instant is then anywhere in a wide bracket): that one is dropped.
 *
 * With clock_poll_s > 0 the thread also reads the SM clock after a read, at most every
 * clock_poll_s, into a ring of its own (PRS__CLIENT_SAMPLER_CLOCKS, the oldest dropped): the clock
 * the GPU ran at, which its power limit may hold below a locked one. A clock read that fails ends
 * them (prs__client_sampler_clocks_on says so).
 *
 * Samples go into a ring of `capacity`; when it is full the oldest is dropped (counted). Another
 * thread drains it. The prs_gpu handle is used by the sampler's thread only, from start to stop:
 * the caller must not use the same handle meanwhile (open a second one for the sampler). Times
 * are CLOCK_MONOTONIC seconds. */
#ifndef PRS_CLIENT_SAMPLER_H
#define PRS_CLIENT_SAMPLER_H

#include "perseus/gpu.h"

#include "attrib.h"

typedef enum prs__client_sample_mode {
    PRS__CLIENT_SAMPLE_ENERGY = 1, /* value: the counter, joules */
    PRS__CLIENT_SAMPLE_POWER = 2   /* value: the power draw, watts */
} prs__client_sample_mode;

typedef struct prs__client_sample {
    double t_lo, t_hi; /* the value was taken at an instant of [t_lo, t_hi] */
    double value;
} prs__client_sample;

/* A reading of the SM clock, taken at an instant of [t_lo, t_hi]. */
typedef struct prs__client_clock_read {
    double t_lo, t_hi;
    int mhz;
} prs__client_clock_read;

#define PRS__CLIENT_SAMPLER_CLOCKS 1024

typedef struct prs__client_sampler_opts {
    double poll_s;       /* energy mode: mean time between reads (0.002) */
    double power_poll_s; /* power mode: mean time between reads (0.1) */
    int capacity;        /* ring size in samples (8192) */
    int force_power;     /* 1: power mode even when the counter works */
    double clock_poll_s; /* > 0: read the SM clock too, at most this often (0: never) */
    /* Optional, called on the sampler's thread just before every read of the GPU (the monitor
     * advances a simulated GPU's clock to the wall clock there), with before_read_ud. */
    void (*before_read)(void *ud);
    void *before_read_ud;
} prs__client_sampler_opts;

typedef struct prs__client_sampler prs__client_sampler;

void prs__client_sampler_opts_init(prs__client_sampler_opts *o);
/* Choose the mode (one energy read) and start the thread. o NULL: defaults. PRS_EINVAL for bad
 * options, PRS_EGPU when neither the counter nor the power can be read (message in
 * prs_gpu_errmsg(g)), PRS_ENOMEM, or PRS_EIO when the thread cannot start. */
int prs__client_sampler_start(prs_gpu *g, const prs__client_sampler_opts *o,
                              prs__client_sampler **out);
/* Stop and join the thread, free everything (samples not drained are lost). NULL: no-op. */
void prs__client_sampler_stop(prs__client_sampler *s);
prs__client_sample_mode prs__client_sampler_mode(const prs__client_sampler *s);
/* Move at most cap samples, oldest first, into buf; returns how many. */
int prs__client_sampler_drain(prs__client_sampler *s, prs__client_sample *buf, int cap);
/* Drain everything into a: prs__client_attrib_energy or _power by the mode. Returns 0 or the first
 * error of a (the samples after it are discarded). */
int prs__client_sampler_feed(prs__client_sampler *s, prs__client_attrib *a);
/* Move at most cap clock readings, oldest first, into buf; returns how many. */
int prs__client_sampler_drain_clocks(prs__client_sampler *s, prs__client_clock_read *buf, int cap);
/* The thread reads the clock (clock_poll_s > 0 and no read of it failed). */
int prs__client_sampler_clocks_on(prs__client_sampler *s);
/* Samples dropped because the ring was full, and reads that failed, so far. */
long prs__client_sampler_dropped(prs__client_sampler *s);
long prs__client_sampler_errors(prs__client_sampler *s);
/* Reads the thread has made so far. */
long prs__client_sampler_reads(prs__client_sampler *s);
/* Reads held up past 3 times their usual cost, dropped (not pushed) so far: power reads, and
 * changed values of a counter that changes at every read. */
long prs__client_sampler_held(prs__client_sampler *s);

#endif
