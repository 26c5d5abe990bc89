/* gpu_probe: what a GPU's energy counter, power reading and CUDA stream do, measured without
 * changing anything (docs/measurement.md, 'What a real GPU does'). It sets no clock, no power
 * limit and no other setting: it reads NVML, and it runs memsets on a buffer of its own.
 *
 *   identity  name, UUID, PCI bus id, the supported SM clocks, the SM clock and power now, and
 *             the GPU that CUDA device 0 is (prs_gpu_rank_device_at)
 *   counter   the energy counter read back to back for SECONDS: how often its value changes
 *             (intervals between changes, each change dated by the middle of the two reads
 *             around it), what one read costs and the CPU time the reads take, the power the
 *             changes imply; the same for the power reading
 *   sampler   the client's sampler (src/client/sampler.c: 2 ms dithered polls) and refresh fit
 *             (src/client/refresh.c) on the same counter for SECONDS: the fitted period and the
 *             share of readings it dates to an instant instead of a poll bracket
 *   beside    SM clock and power reads timed alone, then while another thread (on a handle of
 *             its own) reads the energy counter back to back: whether a costly read holds up
 *             other calls on the same GPU (perseus-gpud answers clock requests while it reads)
 *   stream    on CUDA device 0's primary context, REPS rounds of: memsets, a host function that
 *             notes CLOCK_MONOTONIC, an event, memsets, an event, a host function. The second
 *             host function's note minus the first's, less the device time between the events,
 *             is what two host-function hand-offs add (the client's anchor puts device times on
 *             the host clock through one); the first notes against the events' device times
 *             give the drift of the device timer against CLOCK_MONOTONIC
 *   backlog   REPS rounds of a memset and an event enqueued as fast as the host can, then the
 *             same with a host function in each round: the first round at which a call held the
 *             host back (over 0.1 ms), how many rounds were queued then, and what the calls cost
 *             from there (whether a deep stream, or host functions in it, make recording block)
 *
 * usage: gpu_probe [--gpu SPEC] [--cuda LIB] [--seconds S] [--reps N] [--mib M] [--raw FILE]
 * SPEC as prs_gpu_open (default nvml:0), LIB as prs_stream_open_cuda (default: libcuda.so.1),
 * S seconds per counter section (default 3), N stream rounds (default 200; 0 skips the stream),
 * M MiB per memset (default 1024), FILE: every change of the energy counter and of the power
 * reading as CSV (reading,t_lo_s,t_hi_s,value). Exit 0 when every section ran, 1 when one failed, 2
 * on bad usage. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perseus/clock.h"
#include "perseus/gpu.h"
#include "perseus/stream.h"
#include "cuda_driver.h"
#include "refresh.h"
#include "sampler.h"

#define MAX_READS (1 << 21) /* read costs kept per counter section */
#define MAX_CHANGES 65536   /* value changes kept per counter section */

typedef struct probe_opts {
    const char *gpu, *cuda, *raw;
    double seconds;
    int reps, mib;
} probe_opts;

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Quantile q of the sorted v[0..n); NAN when n is 0. */
static double quantile(const double *v, int n, double q)
{
    return n > 0 ? v[(int)lround(q * (n - 1))] : NAN;
}

/* Sorts v and prints its median, p10, p90, min and max, times scale. */
static void print_spread(const char *what, double *v, int n, double scale, const char *unit)
{
    if (n > 0) qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf("  %-26s median %9.3f %s   p10 %9.3f   p90 %9.3f   min %9.3f   max %9.3f   (%d)\n", what,
           scale * quantile(v, n, 0.5), unit, scale * quantile(v, n, 0.1),
           scale * quantile(v, n, 0.9), scale * quantile(v, n, 0), scale * quantile(v, n, 1), n);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- identity ---- */

static void print_clocks(prs_gpu *g)
{
    int n = 0, clocks[512];
    if (prs_gpu_clocks(g, clocks, 512, &n)) {
        printf("  SM clocks: %s\n", prs_gpu_errmsg(g));
        return;
    }
    int kept = n < 512 ? n : 512, step_min = 0, step_max = 0;
    for (int i = 1; i < kept; i++) {
        int d = clocks[i - 1] - clocks[i];
        if (!step_min || d < step_min) step_min = d;
        if (d > step_max) step_max = d;
    }
    printf("  SM clocks: %d, %d..%d MHz, steps %d..%d MHz\n", n, kept ? clocks[kept - 1] : 0,
           kept ? clocks[0] : 0, step_min, step_max);
}

static void print_identity(prs_gpu *g, const probe_opts *o)
{
    char uuid[96] = "", pci[64] = "", spec[PRS_GPU_SPEC_MAX] = "";
    int mhz = 0;
    unsigned mw = 0;
    prs_error err;
    printf("identity\n  %s (%s)\n", prs_gpu_name(g), o->gpu);
    if (!prs_gpu_uuid(g, uuid, sizeof uuid)) printf("  UUID %s\n", uuid);
    if (!prs_gpu_pci_bus_id(g, pci, sizeof pci)) printf("  PCI bus id %s\n", pci);
    print_clocks(g);
    if (!prs_gpu_sm_clock_now(g, &mhz)) printf("  SM clock now %d MHz\n", mhz);
    double cost[50];
    for (int i = 0; i < 50; i++) {
        double t0 = prs_mono_s();
        prs_gpu_sm_clock_now(g, &mhz);
        cost[i] = prs_mono_s() - t0;
    }
    print_spread("cost of an SM clock read", cost, 50, 1e6, "us");
    if (!prs_gpu_power_mw(g, &mw)) printf("  power now %.1f W\n", mw / 1000.0);
    if (prs_gpu_rank_device_at(0, o->cuda, spec, sizeof spec, &err))
        printf("  CUDA device 0: %s\n", err.msg);
    else
        printf("  CUDA device 0 is %s%s\n", spec,
               strstr(spec, uuid) && uuid[0] ? " (this GPU)" : "");
}

/* ---- counter and power read back to back ---- */

typedef struct reads {
    double *cost;           /* seconds per read, first MAX_READS reads */
    double *lo, *hi, *val;  /* each change: between the middles of the reads around it */
    long n_reads, failures; /* reads made, reads that failed */
    double wall_s, cpu_s;   /* the loop's wall time and the process's CPU time in it */
    int n_cost, n_changes;
} reads;

static int reads_alloc(reads *r)
{
    memset(r, 0, sizeof *r);
    r->cost = malloc(sizeof(double) * MAX_READS);
    r->lo = malloc(sizeof(double) * MAX_CHANGES);
    r->hi = malloc(sizeof(double) * MAX_CHANGES);
    r->val = malloc(sizeof(double) * MAX_CHANGES);
    return r->cost && r->lo && r->hi && r->val ? 0 : -1;
}

static void reads_free(reads *r)
{
    free(r->cost);
    free(r->lo);
    free(r->hi);
    free(r->val);
}

/* One read: the energy counter in J (power 0) or the power in W (power 1); NAN on failure. */
static double read_one(prs_gpu *g, int power)
{
    if (!power) return prs_gpu_read_energy_j(g);
    unsigned mw;
    return prs_gpu_power_mw(g, &mw) ? NAN : mw / 1000.0;
}

static void read_loop(prs_gpu *g, int power, double seconds, reads *r)
{
    double start = prs_mono_s(), end = start + seconds, prev_mid = NAN, prev_val = NAN;
    double cpu0 = cpu_s();
    for (double t0 = prs_mono_s(); t0 < end; t0 = prs_mono_s()) {
        double v = read_one(g, power), t1 = prs_mono_s(), mid = 0.5 * (t0 + t1);
        r->n_reads++;
        if (r->n_cost < MAX_READS) r->cost[r->n_cost++] = t1 - t0;
        if (isnan(v)) {
            r->failures++;
            continue;
        }
        if (!isnan(prev_val) && v != prev_val && r->n_changes < MAX_CHANGES) {
            r->lo[r->n_changes] = prev_mid;
            r->hi[r->n_changes] = mid;
            r->val[r->n_changes++] = v;
        }
        prev_mid = mid;
        prev_val = v;
    }
    r->wall_s = prs_mono_s() - start;
    r->cpu_s = cpu_s() - cpu0;
}

/* Appends the changes to path (the energy section starts it with a header line). */
static void write_raw(const char *path, const reads *r, int power)
{
    FILE *f = fopen(path, power ? "a" : "w");
    if (!f) {
        fprintf(stderr, "gpu_probe: cannot write %s\n", path);
        return;
    }
    if (!power) fprintf(f, "reading,t_lo_s,t_hi_s,value\n");
    for (int i = 0; i < r->n_changes; i++)
        fprintf(f, "%s,%.6f,%.6f,%.3f\n", power ? "power_w" : "energy_j", r->lo[i], r->hi[i],
                r->val[i]);
    fclose(f);
}

/* Intervals between changes and, for the counter, the power each change implies. An H100's power
 * reading changes in two steps a few microseconds apart: a change within STEP_S of the one
 * before is a step of it, not a new interval. */
#define STEP_S 1e-3
static void print_changes(const reads *r, int power)
{
    int n = r->n_changes > 1 ? r->n_changes - 1 : 0, n_gap = 0, steps = 0;
    double *gap = malloc(sizeof(double) * (size_t)(n + 1));
    double *watts = malloc(sizeof(double) * (size_t)(n + 1));
    if (!gap || !watts) goto out;
    double t_prev = n ? 0.5 * (r->lo[0] + r->hi[0]) : 0;
    for (int i = 0; i < n; i++) {
        double t0 = 0.5 * (r->lo[i] + r->hi[i]), t1 = 0.5 * (r->lo[i + 1] + r->hi[i + 1]);
        watts[i] = (r->val[i + 1] - r->val[i]) / (t1 - t0);
        if (power && t1 - t0 < STEP_S) {
            steps++;
            continue;
        }
        gap[n_gap++] = t1 - t_prev;
        t_prev = t1;
    }
    printf("  reads %ld (%ld failed), value changes %d (%.1f %% of reads)\n", r->n_reads,
           r->failures, r->n_changes, r->n_reads ? 100.0 * r->n_changes / r->n_reads : 0.0);
    if (power)
        printf("  changes within %.0f ms of the one before (steps of it): %d\n", 1e3 * STEP_S,
               steps);
    print_spread("interval between changes", gap, n_gap, 1e3, "ms");
    if (!power) print_spread("power over an interval", watts, n, 1, "W");
out:
    free(gap);
    free(watts);
}

static int section_reads(prs_gpu *g, const probe_opts *o, int power)
{
    reads r;
    if (reads_alloc(&r)) {
        reads_free(&r);
        return 1;
    }
    printf("%s, read back to back for %.1f s\n", power ? "power reading" : "energy counter",
           o->seconds);
    read_loop(g, power, o->seconds, &r);
    int rc = r.failures == r.n_reads ? 1 : 0;
    if (rc) printf("  every read failed: %s\n", prs_gpu_errmsg(g));
    print_changes(&r, power);
    print_spread("cost of one read", r.cost, r.n_cost, 1e6, "us");
    printf("  CPU busy %.0f %% of the time while reading\n", 100 * r.cpu_s / r.wall_s);
    if (o->raw) write_raw(o->raw, &r, power);
    reads_free(&r);
    return rc;
}

/* ---- the client's sampler and refresh fit ---- */

static int section_sampler(prs_gpu *g, const probe_opts *o)
{
    prs__client_sampler *s;
    if (prs__client_sampler_start(g, NULL, &s)) {
        printf("sampler: cannot start: %s\n", prs_gpu_errmsg(g));
        return 1;
    }
    struct timespec ts = {(time_t)o->seconds, (long)(1e9 * (o->seconds - floor(o->seconds)))};
    double cpu0 = cpu_s(), t0 = prs_mono_s();
    nanosleep(&ts, NULL);
    double wall = prs_mono_s() - t0, busy = (cpu_s() - cpu0) / wall;
    long n_reads = prs__client_sampler_reads(s);
    static prs__client_sample buf[8192];
    int n = prs__client_sampler_drain(s, buf, 8192);
    int mode = prs__client_sampler_mode(s);
    prs__client_sampler_stop(s);
    static prs__client_refresh fit;
    prs__client_refresh_init(&fit);
    double width[8192];
    int dated = 0;
    for (int i = 0; i < n; i++) {
        width[i] = buf[i].t_hi - buf[i].t_lo;
        double lo = buf[i].t_lo, hi = buf[i].t_hi;
        prs__client_refresh_map(&fit, &lo, &hi);
        dated += lo == hi && width[i] > 0;
    }
    printf("sampler (client defaults) for %.1f s: %s mode, %d readings\n", o->seconds,
           mode == PRS__CLIENT_SAMPLE_ENERGY ? "energy" : "power", n);
    print_spread("poll bracket", width, n, 1e3, "ms");
    printf("  CPU busy %.0f %% of the time (the sampler's thread), %ld reads (%.1f a second)\n",
           100 * busy, n_reads, n_reads / wall);
    printf("  refresh fit: period %.3f ms, phase %s, %d of %d readings dated to an instant\n",
           1e3 * fit.period, fit.locked ? "locked" : "not locked", dated, n);
    return n ? 0 : 1;
}

/* ---- cheap reads beside a thread that reads the counter ---- */

typedef struct reader {
    prs_gpu *g;
    atomic_int stop;
    long reads;
} reader;

static void *read_energy_loop(void *arg)
{
    reader *r = arg;
    while (!atomic_load(&r->stop)) {
        prs_gpu_read_energy_j(r->g);
        r->reads++;
    }
    return NULL;
}

/* The cost of SM clock and power reads for seconds (n of each kept in clk, pw). */
static void time_cheap_reads(prs_gpu *g, double seconds, double *clk, double *pw, int *n)
{
    int mhz;
    unsigned mw;
    *n = 0;
    for (double end = prs_mono_s() + seconds; prs_mono_s() < end && *n < MAX_CHANGES; ++*n) {
        double t0 = prs_mono_s();
        prs_gpu_sm_clock_now(g, &mhz);
        double t1 = prs_mono_s();
        prs_gpu_power_mw(g, &mw);
        clk[*n] = t1 - t0;
        pw[*n] = prs_mono_s() - t1;
        struct timespec ts = {0, 200000}; /* 0.2 ms: a few thousand samples a second */
        nanosleep(&ts, NULL);
    }
}

/* Does a read of the energy counter in another thread (on a handle of its own) hold up other
 * NVML calls on the same GPU? The SM clock and power reads timed alone, then beside it. */
static int section_beside(prs_gpu *g, const probe_opts *o)
{
    reader r = {0};
    prs_error err;
    if (prs_gpu_open(o->gpu, &r.g, &err)) {
        printf("beside: no second handle: %s\n", err.msg);
        return 1;
    }
    double *clk = malloc(sizeof(double) * MAX_CHANGES), *pw = malloc(sizeof(double) * MAX_CHANGES);
    int n = 0, rc = !clk || !pw;
    double half = o->seconds / 2;
    printf("SM clock and power reads, alone and beside a thread reading the counter, %.1f s each\n",
           half);
    if (!rc) {
        time_cheap_reads(g, half, clk, pw, &n);
        print_spread("SM clock read, alone", clk, n, 1e6, "us");
        print_spread("power read, alone", pw, n, 1e6, "us");
    }
    pthread_t th;
    if (!rc && (rc = pthread_create(&th, NULL, read_energy_loop, &r)) == 0) {
        time_cheap_reads(g, half, clk, pw, &n);
        atomic_store(&r.stop, 1);
        pthread_join(th, NULL);
        print_spread("SM clock read, beside", clk, n, 1e6, "us");
        print_spread("power read, beside", pw, n, 1e6, "us");
        printf("  the other thread read the counter %ld times (%.0f a second)\n", r.reads,
               r.reads / half);
    }
    free(clk);
    free(pw);
    prs_gpu_close(r.g);
    return rc ? 1 : 0;
}

/* ---- host functions and events on a CUDA stream ---- */

typedef struct round_ {
    prs_event *e1, *e2, *e3;    /* e3 right after e2: what an event alone takes on the device */
    double h1, h2;              /* CLOCK_MONOTONIC noted by the host functions */
    double record_s, host_fn_s; /* host cost of recording e1, of enqueueing the first host fn */
} round_;

/* The last host function runs after the event before it completed: wait (up to 1 s) for its
 * note. 0, or -1 when it never came. */
static int wait_note(const volatile double *note)
{
    struct timespec ts = {0, 100000}; /* 0.1 ms */
    for (int i = 0; i < 10000 && *note == 0; i++)
        nanosleep(&ts, NULL);
    return *note == 0 ? -1 : 0;
}

/* Enqueues one round: memsets, note h1, e1, memsets, e2, e3, note h2 (the host costs of the
 * first host function and of e1 timed). */
static int enqueue_round(prs_stream *s, const bench_cuda_mem *a, uint64_t buf, size_t words,
                         round_ *r)
{
    if (a->memset32(buf, 0, words, NULL)) return -1;
    double t0 = prs_mono_s();
    if (prs_stream_host_fn(s, bench_note_time, &r->h1)) return -1;
    double t1 = prs_mono_s();
    if (prs_event_record(s, r->e1)) return -1;
    r->record_s = prs_mono_s() - t1;
    r->host_fn_s = t1 - t0;
    if (a->memset32(buf, 1, words, NULL)) return -1;
    if (prs_event_record(s, r->e2) || prs_event_record(s, r->e3)) return -1;
    if (prs_stream_host_fn(s, bench_note_time, &r->h2)) return -1;
    return 0;
}

/* Host costs of enqueueing, and the device time between two events with nothing between. */
static int report_costs(prs_stream *s, round_ *r, int n)
{
    double *rec = malloc(sizeof(double) * (size_t)n), *hf = malloc(sizeof(double) * (size_t)n);
    double *ee = malloc(sizeof(double) * (size_t)n);
    int rc = rec && hf && ee ? 0 : 1;
    for (int i = 0; !rc && i < n; i++) {
        rec[i] = r[i].record_s;
        hf[i] = r[i].host_fn_s;
        rc = prs_event_elapsed_s(s, r[i].e2, r[i].e3, &ee[i]);
    }
    if (!rc) {
        print_spread("event record (host)", rec, n, 1e6, "us");
        print_spread("host fn enqueue (host)", hf, n, 1e6, "us");
        print_spread("event to event (device)", ee, n, 1e6, "us");
    }
    free(rec);
    free(hf);
    free(ee);
    return rc;
}

/* Hand-off cost per round, and the drift of the device timer (least squares of the host notes on
 * the device times since the first round). */
static int report_rounds(prs_stream *s, round_ *r, int n)
{
    double *gap = malloc(sizeof(double) * (size_t)n), *dev = malloc(sizeof(double) * (size_t)n);
    int rc = gap && dev ? 0 : 1;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, work = 0;
    for (int i = 0; !rc && i < n; i++) {
        double inside, since;
        rc = prs_event_elapsed_s(s, r[i].e1, r[i].e2, &inside) ||
             prs_event_elapsed_s(s, r[0].e1, r[i].e1, &since);
        if (rc) break;
        gap[i] = r[i].h2 - r[i].h1 - inside;
        dev[i] = since;
        work += inside / n;
        double y = r[i].h1 - r[0].h1 - since;
        sx += since, sy += y, sxx += since * since, sxy += since * y;
    }
    if (!rc) {
        double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        printf("  device time between the events: %.3f ms a round\n", 1e3 * work);
        print_spread("two hand-offs", gap, n, 1e6, "us");
        printf("  device timer against CLOCK_MONOTONIC over %.3f s: %+.1f ppm\n", dev[n - 1],
               1e6 * slope);
    }
    free(gap);
    free(dev);
    return rc;
}

static int run_rounds(prs_stream *s, const bench_cuda_mem *a, const probe_opts *o)
{
    size_t bytes = (size_t)o->mib << 20;
    uint64_t buf = 0;
    round_ *r = calloc((size_t)o->reps, sizeof *r);
    int rc = !r || a->alloc(&buf, bytes) ? 1 : 0, made = 0;
    for (; !rc && made < o->reps; made++)
        rc = prs_event_new(s, &r[made].e1) || prs_event_new(s, &r[made].e2) ||
             prs_event_new(s, &r[made].e3);
    for (int i = 0; !rc && i < o->reps; i++)
        rc = enqueue_round(s, a, buf, bytes / 4, &r[i]);
    if (!rc) rc = prs_event_wait(s, r[o->reps - 1].e2);
    if (!rc) rc = wait_note(&r[o->reps - 1].h2);
    if (!rc) rc = report_rounds(s, r, o->reps);
    if (!rc) rc = report_costs(s, r, o->reps);
    if (rc) printf("  failed: %s\n", prs_stream_errmsg(s));
    for (int i = 0; r && i < made; i++) {
        prs_event_free(s, r[i].e1);
        prs_event_free(s, r[i].e2);
        prs_event_free(s, r[i].e3);
    }
    if (buf) a->memfree(buf);
    free(r);
    return rc;
}

/* ---- whether a deep stream blocks the host, and on what ---- */

#define BLOCKED_S 100e-6 /* a call that took longer held the host back */

/* One backlog pass: N rounds of a memset and an event (with a host function before the event
 * when HOST_FN), enqueued as fast as the host can; the costliest call of each round into COST,
 * its enqueue instant into AT. 0, or -1 on a driver failure. */
static int backlog_pass(prs_stream *s, const bench_cuda_mem *a, uint64_t buf, size_t words,
                        int host_fn, prs_event **e, int n, double *cost, double *at)
{
    static double sink; /* the host functions' notes: nobody reads them */
    for (int i = 0; i < n; i++) {
        double t0 = prs_mono_s(), worst = 0;
        if (a->memset32(buf, (unsigned)i, words, NULL)) return -1;
        double t1 = prs_mono_s();
        worst = t1 - t0;
        if (host_fn && prs_stream_host_fn(s, bench_note_time, &sink)) return -1;
        double t2 = prs_mono_s();
        worst = fmax(worst, t2 - t1);
        if (prs_event_record(s, e[i])) return -1;
        cost[i] = fmax(worst, prs_mono_s() - t2);
        at[i] = t0;
    }
    return prs_event_wait(s, e[n - 1]);
}

/* What a pass saw: the first round held back, how many rounds were queued then (enqueued less
 * completed at the device's pace), the costs before and after. */
static int report_backlog(prs_stream *s, prs_event **e, int n, const double *cost, const double *at,
                          int host_fn)
{
    double per_round;
    if (prs_event_elapsed_s(s, e[0], e[n - 1], &per_round)) return -1;
    per_round /= n - 1;
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (cost[i] > BLOCKED_S) first = i;
    printf("  %s: device %.3f ms a round; ", host_fn ? "memset, host fn, event" : "memset, event",
           1e3 * per_round);
    if (first < 0) {
        printf("no call held the host back over %d rounds\n", n);
        return 0;
    }
    double done = per_round > 0 ? (at[first] - at[0]) / per_round : 0;
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v) return -1;
    memcpy(v, cost + first, sizeof(double) * (size_t)(n - first));
    printf("first held back at round %d, about %.0f rounds queued\n", first,
           first - fmin(done, first));
    print_spread(host_fn ? "held back, with host fns" : "held back, events only", v, n - first, 1e6,
                 "us");
    free(v);
    return 0;
}

static int section_backlog(prs_stream *s, const bench_cuda_mem *a, const probe_opts *o)
{
    int n = o->reps < 2 ? 2 : o->reps, made = 0, rc = 0;
    size_t words = ((size_t)o->mib << 20) / 4 / 4; /* a quarter of the stream section's memsets */
    uint64_t buf = 0;
    prs_event **e = calloc((size_t)n, sizeof *e);
    double *cost = calloc((size_t)n, sizeof *cost), *at = calloc((size_t)n, sizeof *at);
    printf("backlog: %d rounds enqueued ahead, with and without a host function\n", n);
    rc = !e || !cost || !at || a->alloc(&buf, words * 4) ? 1 : 0;
    for (; !rc && made < n; made++)
        rc = prs_event_new(s, &e[made]);
    for (int host_fn = 0; !rc && host_fn < 2; host_fn++)
        rc = backlog_pass(s, a, buf, words, host_fn, e, n, cost, at) ||
             report_backlog(s, e, n, cost, at, host_fn);
    if (rc) printf("  failed: %s\n", prs_stream_errmsg(s));
    for (int i = 0; i < made; i++)
        prs_event_free(s, e[i]);
    if (buf) a->memfree(buf);
    free(e);
    free(cost);
    free(at);
    return rc;
}

static int section_stream(const probe_opts *o)
{
    bench_cuda_mem a;
    printf("stream: %d rounds of 2 x %d MiB memsets on CUDA device 0\n", o->reps, o->mib);
    if (!bench_cuda_mem_load(o->cuda ? o->cuda : "libcuda.so.1", &a)) return 1;
    prs_stream *s;
    prs_error err;
    if (prs_stream_open_cuda(0, o->cuda, &s, &err)) {
        printf("  %s\n", err.msg);
        return 1;
    }
    int rc = run_rounds(s, &a, o);
    rc |= section_backlog(s, &a, o);
    prs_stream_close(s);
    return rc;
}

/* ---- command line ---- */

static int usage(const char *why)
{
    fprintf(stderr,
            "gpu_probe: %s\nusage: gpu_probe [--gpu SPEC] [--cuda LIB] [--seconds S] "
            "[--reps N] [--mib M] [--raw FILE]\n",
            why);
    return 2;
}

static int parse(int argc, char **argv, probe_opts *o)
{
    *o = (probe_opts){.gpu = "nvml:0", .seconds = 3, .reps = 200, .mib = 1024};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) return usage("an option lacks its value");
        i++;
        if (!strcmp(k, "--gpu"))
            o->gpu = v;
        else if (!strcmp(k, "--cuda"))
            o->cuda = v;
        else if (!strcmp(k, "--raw"))
            o->raw = v;
        else if (!strcmp(k, "--seconds"))
            o->seconds = strtod(v, &end);
        else if (!strcmp(k, "--reps"))
            o->reps = (int)strtol(v, &end, 10);
        else if (!strcmp(k, "--mib"))
            o->mib = (int)strtol(v, &end, 10);
        else
            return usage("unknown option");
        if (end && *end) return usage("a number is malformed");
    }
    if (!(o->seconds >= 0.1 && o->seconds <= 600)) return usage("--seconds: 0.1 to 600");
    if (o->reps < 0 || o->reps > 100000) return usage("--reps: 0 to 100000");
    if (o->mib < 1 || o->mib > 65536) return usage("--mib: 1 to 65536");
    return 0;
}

int main(int argc, char **argv)
{
    probe_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    prs_gpu *g;
    prs_error err;
    if (prs_gpu_open(o.gpu, &g, &err)) {
        fprintf(stderr, "gpu_probe: %s\n", err.msg);
        return 1;
    }
    print_identity(g, &o);
    rc |= section_reads(g, &o, 0);
    rc |= section_reads(g, &o, 1);
    rc |= section_sampler(g, &o);
    rc |= section_beside(g, &o);
    prs_gpu_close(g);
    if (o.reps) rc |= section_stream(&o);
    return rc ? 1 : 0;
}
