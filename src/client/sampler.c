/* The sampler thread (sampler.h). One mutex guards the ring and the stop flag; the thread waits
 * on a condition variable bound to CLOCK_MONOTONIC, so stop wakes it at once. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perseus/clock.h"
#include "refresh.h"
#include "sampler.h"

#define COSTLY_S 5e-4     /* reads that cost more are spared (next_read) */
#define FREE_CHANGES 48   /* costly reads go unguided and uncapped until this many changes */
#define IDLE_READS 2      /* then, unguided, at most 1 / IDLE_READS of the time */
#define GUARD_READS 1.5   /* a guarded poll starts this many reads before the refresh, */
#define GUARD_S 0.001     /* plus this, */
#define GUARD_SHARE 0.1   /* plus this share of the period while the fit does not hold */
#define COST_WEIGHT 0.125 /* weight of the latest read in the read cost's moving average */
#define SEEN_SLACK 0.05   /* a change's dated instant may precede its refresh by this share */
#define HELD_UP 1.1       /* a read lasting this many times its usual cost was held up, */
#define SURE_SHARE 0.4    /* and its value lies at least this share of that cost inside it */
#define HELD_DROP 3.0     /* a power read or a continuous counter's, this many times: dropped */

struct prs__client_sampler {
    prs_gpu *gpu;
    prs__client_sampler_opts o;
    prs__client_sample_mode mode;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    prs__client_sample *ring;
    int head, len;
    long dropped, errors;
    uint64_t rng;
    atomic_long reads;       /* reads made */
    atomic_long held;        /* reads held up and dropped (HELD_DROP) */
    long changes;            /* changes of the counter seen (the sampler's thread only) */
    double read_cost;        /* seconds a read takes, a moving average */
    prs__client_refresh fit; /* the refresh instants, fitted on the thread's own brackets */
    prs__client_clock_read clocks[PRS__CLIENT_SAMPLER_CLOCKS]; /* clock readings (under mu) */
    int c_head, c_len;
    atomic_int clocks_on; /* clock_poll_s > 0 and no clock read failed */
    double last_clock_t;  /* the thread's latest clock read */
};

void prs__client_sampler_opts_init(prs__client_sampler_opts *o)
{
    memset(o, 0, sizeof *o);
    o->poll_s = 0.002;
    o->power_poll_s = 0.1;
    o->capacity = 8192;
}

/* Uniform in [0.5, 1.5) (splitmix64). */
static double dither(prs__client_sampler *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return 0.5 + (double)(z >> 11) * 0x1.0p-53;
}

/* Sleep until the monotonic time t or a stop; returns 1 when stopping. */
static int wait_until(prs__client_sampler *s, double t)
{
    struct timespec ts = prs_mono_timespec(t);
    pthread_mutex_lock(&s->mu);
    while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {
    }
    int stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void push(prs__client_sampler *s, double lo, double hi, double v)
{
    pthread_mutex_lock(&s->mu);
    if (s->len == s->o.capacity) {
        s->head = (s->head + 1) % s->o.capacity;
        s->len--;
        s->dropped++;
    }
    s->ring[(s->head + s->len) % s->o.capacity] = (prs__client_sample){lo, hi, v};
    s->len++;
    pthread_mutex_unlock(&s->mu);
}

/* After a read: the SM clock, when due. */
static void read_clock(prs__client_sampler *s)
{
    double t0 = prs_mono_s();
    if (!atomic_load_explicit(&s->clocks_on, memory_order_relaxed) ||
        t0 - s->last_clock_t < s->o.clock_poll_s)
        return;
    int mhz = 0;
    int rc = prs_gpu_sm_clock_now(s->gpu, &mhz);
    double t1 = prs_mono_s();
    s->last_clock_t = t0;
    if (rc || mhz <= 0) {
        atomic_store_explicit(&s->clocks_on, 0, memory_order_relaxed);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->c_len == PRS__CLIENT_SAMPLER_CLOCKS) {
        s->c_head = (s->c_head + 1) % PRS__CLIENT_SAMPLER_CLOCKS;
        s->c_len--;
    }
    s->clocks[(s->c_head + s->c_len) % PRS__CLIENT_SAMPLER_CLOCKS] =
        (prs__client_clock_read){t0, t1, mhz};
    s->c_len++;
    pthread_mutex_unlock(&s->mu);
}

static void count_error(prs__client_sampler *s)
{
    pthread_mutex_lock(&s->mu);
    s->errors++;
    pthread_mutex_unlock(&s->mu);
}

/* When to read next (the start of the next read), after a read that ended at now.
 *
 * Polls come every poll_s (dithered), never to catch up after falling behind. A read that costs
 * more than COSTLY_S keeps a CPU busy that long (an H100's: about 3 ms, docs/measurement.md),
 * and the counter changes only at its refreshes. Until FREE_CHANGES changes were seen such reads
 * go on as polled (their narrow brackets make the first fit of the refreshes good); after that
 * they take at most 1 / IDLE_READS of the time, and once the refresh fit on the thread's own
 * brackets has a period (refresh.h), the thread sleeps until a guard before the next refresh it
 * predicts (the one after the last change seen; a change is never seen before its refresh) and
 * polls from there until it sees it. The guard is GUARD_READS reads plus GUARD_S, plus GUARD_SHARE
 * of the period while the fit does not hold yet. A refresh that has not come by the end of its
 * guard leaves the thread polling at the capped rate until the next change. */
static double next_read(prs__client_sampler *s, double next, double now, double last_change)
{
    const prs__client_refresh *f = &s->fit;
    double c = s->read_cost, capped = now + (IDLE_READS - 1) * c;
    next += s->o.poll_s * dither(s);
    if (next < now) next = now; /* fell behind: do not try to catch up */
    if (!(c > COSTLY_S)) return next;
    if (!(f->period > 0) || f->contiguous || !(last_change > 0))
        return s->changes < FREE_CHANGES || next > capped ? next : capped;
    double guard = GUARD_READS * c + GUARD_S + (f->locked ? 0 : GUARD_SHARE * f->period);
    if (guard > 0.5 * f->period) guard = 0.5 * f->period;
    double seen = floor((last_change - f->phase) / f->period + SEEN_SLACK);
    double due = f->phase + (seen + 1) * f->period;
    if (now > due + guard) return next > capped ? next : capped; /* missed: wait for a change */
    return due - guard > next ? due - guard : next;
}

static double read_energy(prs__client_sampler *s)
{
    if (s->o.before_read) s->o.before_read(s->o.before_read_ud);
    return prs_gpu_read_energy_j(s->gpu);
}

/* The instants a read's value was taken at the earliest and the latest, for a read from t0 to t1
 * whose usual cost is c: its middle; but a read held up well past its usual cost (a slow read from
 * the driver's tail, a thread the scheduler preempted) may have taken its value anywhere but near
 * its ends, and its middle could date a change on the wrong side of its refresh. */
static void value_span(double c, double t0, double t1, double *early, double *late)
{
    *early = *late = 0.5 * (t0 + t1);
    if (!(c > 0) || t1 - t0 <= HELD_UP * c) return;
    *early = t0 + SURE_SHARE * c;
    *late = t1 - SURE_SHARE * c;
}

/* A read's instant is taken as the middle of the call, and a change lies between two such
 * instants, so consecutive brackets touch; next to a read that was held up they span what its
 * value's instant may have been (value_span), but never overlap the bracket before (a bracket
 * opened by the read that closed the one before starts where that one ended: its refresh comes a
 * period after the previous one, past the held-up read). */
static void run_energy(prs__client_sampler *s)
{
    double t0 = prs_mono_s(), last = read_energy(s), prev = 0.5 * (t0 + prs_mono_s()),
           last_change = 0, pushed = 0;
    double next = t0;
    s->read_cost = 2 * (prev - t0);
    while (!wait_until(s, next = next_read(s, next, prs_mono_s(), last_change))) {
        t0 = prs_mono_s();
        double e = read_energy(s), t1 = prs_mono_s(), early, late;
        int held = s->read_cost > 0 && t1 - t0 > HELD_DROP * s->read_cost;
        value_span(s->read_cost, t0, t1, &early, &late);
        /* a held-up read says little of the cost: it counts as at most twice the average */
        s->read_cost += COST_WEIGHT * (fmin(t1 - t0, 2 * s->read_cost) - s->read_cost);
        atomic_fetch_add_explicit(&s->reads, 1, memory_order_relaxed);
        read_clock(s);
        if (isnan(e)) {
            count_error(s);
            continue;
        }
        if (e != last && !isnan(last) && held && s->fit.contiguous) {
            /* A continuous counter's value taken somewhere in a hold: dated at the hold's end (a
             * continuous counter's instant), it came out late, and every power low beside busy
             * loops (test_other_work: 4-10 %). The next read's row spans it. */
            atomic_fetch_add_explicit(&s->held, 1, memory_order_relaxed);
            last = e;
            continue;
        }
        if (e != last && !isnan(last)) {
            double lo = prev > pushed ? prev : pushed, hi = late; /* brackets never overlap */
            push(s, lo, hi, e);
            pushed = hi;
            s->changes++;
            prs__client_refresh_map(&s->fit, &lo, &hi);
            last_change = hi;
        }
        last = e;
        prev = early;
    }
}

/* A power reading is taken as the power over its call's bracket. A read held up far past its usual
 * cost (the driver waited, the scheduler preempted the thread) took its value at some instant of
 * a bracket that may span a computation's start or end, where the value says nothing of the
 * rest: it is dropped, not pushed (on a loaded machine such reads gather at the computations'
 * edges, and counting them pulled every kind's power 3-5 % low). */
static void run_power(prs__client_sampler *s)
{
    double next = prs_mono_s();
    s->read_cost = 0;
    while (!wait_until(s, next += s->o.power_poll_s * dither(s))) {
        unsigned mw;
        double t0 = prs_mono_s();
        if (s->o.before_read) s->o.before_read(s->o.before_read_ud);
        int rc = prs_gpu_power_mw(s->gpu, &mw);
        double t1 = prs_mono_s(), c = s->read_cost;
        s->read_cost = c > 0 ? c + COST_WEIGHT * (fmin(t1 - t0, 2 * c) - c) : t1 - t0;
        atomic_fetch_add_explicit(&s->reads, 1, memory_order_relaxed);
        read_clock(s);
        if (rc)
            count_error(s);
        else if (c > 0 && t1 - t0 > HELD_DROP * c)
            atomic_fetch_add_explicit(&s->held, 1, memory_order_relaxed);
        else
            push(s, t0, t1, 1e-3 * (double)mw);
        if (next < t0) next = t0;
    }
}

static void *sampler_main(void *arg)
{
    prs__client_sampler *s = arg;
    if (s->mode == PRS__CLIENT_SAMPLE_ENERGY)
        run_energy(s);
    else
        run_power(s);
    return NULL;
}

static void sampler_free(prs__client_sampler *s)
{
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->ring);
    free(s);
}

/* Energy when the counter reads, else power when that reads. */
static int choose_mode(prs__client_sampler *s)
{
    unsigned mw;
    if (!s->o.force_power && !isnan(read_energy(s)))
        s->mode = PRS__CLIENT_SAMPLE_ENERGY;
    else if (prs_gpu_power_mw(s->gpu, &mw) == 0)
        s->mode = PRS__CLIENT_SAMPLE_POWER;
    else
        return PRS_EGPU;
    return 0;
}

int prs__client_sampler_start(prs_gpu *g, const prs__client_sampler_opts *o,
                              prs__client_sampler **out)
{
    *out = NULL;
    prs__client_sampler_opts def;
    if (!o) {
        prs__client_sampler_opts_init(&def);
        o = &def;
    }
    if (!g || !(o->poll_s > 0 && o->poll_s < 10) ||
        !(o->power_poll_s > 0 && o->power_poll_s < 60) || o->capacity < 1 ||
        !(o->clock_poll_s >= 0 && o->clock_poll_s < 60))
        return PRS_EINVAL;
    prs__client_sampler *s = calloc(1, sizeof *s);
    if (!s) return PRS_ENOMEM;
    s->gpu = g;
    s->o = *o;
    prs__client_refresh_init(&s->fit);
    s->rng = (uint64_t)(prs_mono_s() * 1e9) ^ (uint64_t)(uintptr_t)s;
    atomic_init(&s->clocks_on, o->clock_poll_s > 0);
    s->ring = calloc((size_t)o->capacity, sizeof(prs__client_sample));
    if (!s->ring || prs_sync_init_mono(&s->mu, &s->cv)) {
        free(s->ring);
        free(s);
        return PRS_ENOMEM;
    }
    int rc = choose_mode(s);
    if (!rc && pthread_create(&s->thread, NULL, sampler_main, s)) rc = PRS_EIO;
    if (rc) {
        sampler_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void prs__client_sampler_stop(prs__client_sampler *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    sampler_free(s);
}

prs__client_sample_mode prs__client_sampler_mode(const prs__client_sampler *s)
{
    return s->mode;
}

int prs__client_sampler_drain(prs__client_sampler *s, prs__client_sample *buf, int cap)
{
    pthread_mutex_lock(&s->mu);
    int n = s->len < cap ? s->len : cap;
    for (int i = 0; i < n; i++)
        buf[i] = s->ring[(s->head + i) % s->o.capacity];
    s->head = (s->head + n) % s->o.capacity;
    s->len -= n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int prs__client_sampler_drain_clocks(prs__client_sampler *s, prs__client_clock_read *buf, int cap)
{
    pthread_mutex_lock(&s->mu);
    int n = s->c_len < cap ? s->c_len : cap;
    for (int i = 0; i < n; i++)
        buf[i] = s->clocks[(s->c_head + i) % PRS__CLIENT_SAMPLER_CLOCKS];
    s->c_head = (s->c_head + n) % PRS__CLIENT_SAMPLER_CLOCKS;
    s->c_len -= n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int prs__client_sampler_clocks_on(prs__client_sampler *s)
{
    return atomic_load_explicit(&s->clocks_on, memory_order_relaxed);
}

int prs__client_sampler_feed(prs__client_sampler *s, prs__client_attrib *a)
{
    prs__client_sample buf[256];
    int n, rc = 0;
    while ((n = prs__client_sampler_drain(s, buf, 256)) > 0)
        for (int i = 0; i < n && !rc; i++)
            rc = s->mode == PRS__CLIENT_SAMPLE_ENERGY
                     ? prs__client_attrib_energy(a, buf[i].t_lo, buf[i].t_hi, buf[i].value)
                     : prs__client_attrib_power(a, buf[i].t_lo, buf[i].t_hi, buf[i].value);
    return rc;
}

long prs__client_sampler_dropped(prs__client_sampler *s)
{
    pthread_mutex_lock(&s->mu);
    long n = s->dropped;
    pthread_mutex_unlock(&s->mu);
    return n;
}

long prs__client_sampler_errors(prs__client_sampler *s)
{
    pthread_mutex_lock(&s->mu);
    long n = s->errors;
    pthread_mutex_unlock(&s->mu);
    return n;
}

long prs__client_sampler_held(prs__client_sampler *s)
{
    return atomic_load_explicit(&s->held, memory_order_relaxed);
}

long prs__client_sampler_reads(prs__client_sampler *s)
{
    return atomic_load_explicit(&s->reads, memory_order_relaxed);
}
