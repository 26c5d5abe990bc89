/* gpu_attrib: does the client's energy attribution hold on a real GPU? Read-only: it sets no
 * clock, no power limit and no other setting; it reads NVML and runs work of its own on CUDA
 * device 0 (docs/measurement.md, 'Attribution on a real GPU').
 *
 * Two kinds of computations, as different in power as a GPU's work gets: "fma", a kernel of
 * fused multiply-adds on every SM (compute-bound, loaded as PTX text), and "memset", memsets of a
 * buffer (memory-bound); and blocked time, where the stream waits for a host function that
 * sleeps (as a GPU waits on a collective or on the host).
 *
 *   steady    each kind alone, back to back, for REF seconds, and the stream blocked for REF
 *             seconds: the median power of the counter's changes between readings over the
 *             last three quarters (readings dated by the client's refresh fit), the reference
 *             for each kind
 *   mixed     for SECONDS, computations of random kind and length (uniform in [MIN, MAX] ms),
 *             half of them after a blocked gap of up to MAX/2 ms, timed by events as the client
 *             times them (device times put on the host clock through a host function's note);
 *             the client's sampler reads the counter, and its attribution (src/client/attrib.c)
 *             fits one power per kind and one for the blocked time
 *
 * A second fit (unless H is 0) gives the first H ms of each computation, and of each blocked gap
 * after one, unknowns of their own: where the first fit is off, it shows whether the power lags
 * the work at its changes.
 *
 * The report sets each fitted power beside its steady reference. Where the linear model the
 * client assumes holds (constant power per kind, whatever came before), they agree to within the
 * fit's standard errors; where a GPU's power lags behind its work (ramps, boost), short
 * computations come out off their steady power.
 *
 * usage: gpu_attrib [--gpu SPEC] [--cuda LIB] [--seconds S] [--ref-seconds R] [--min-ms A]
 *                   [--max-ms B] [--head-ms H] [--mib M] [--seed N]
 * SPEC as prs_gpu_open (default nvml:0), LIB as prs_stream_open_cuda (default libcuda.so.1), S
 * seconds of mixed work (default 20), R seconds per steady reference (default 3), computations
 * of A to B ms (default 2 to 30), heads of H ms (default 1, at most A), M MiB per memset (default
 * 256), N the seed of the mix (1). The counter read must be CUDA device 0's GPU (refused
 * otherwise, naming the --gpu to give). Exit 0 when every section ran and the client's fit was
 * usable, 1 otherwise, 2 on bad usage. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perseus/clock.h"
#include "perseus/gpu.h"
#include "perseus/stream.h"
#include "attrib.h"
#include "cuda_driver.h"
#include "refresh.h"
#include "sampler.h"

#define N_KINDS 2
#define KIND_BLOCKED (-1)
#define BLOCK_S 0.25   /* planned device time per enqueued block */
#define BLOCK_MAX 1024 /* computations per block */
#define GRID 1024      /* fma blocks of 256 threads: enough to fill an H100 */
#define STEADY_MS 20.0 /* a computation of the steady references */
#define WAIT_S 60.0    /* longest wait for a block, beyond its planned time */
#define MAX_SAMPLES 65536

static const char *const kind_name[N_KINDS] = {"fma", "memset"};

typedef struct attrib_opts {
    const char *gpu, *cuda;
    double seconds, ref_s, min_ms, max_ms, head_ms;
    int mib;
    unsigned seed;
} attrib_opts;

/* ---- the driver calls of the work ---- */

typedef struct cu_api {
    bench_cuda_mem mem;
    int (*sync)(void);
    int (*load)(void **, const void *, unsigned, int *, void **);
    int (*unload)(void *);
    int (*get_fn)(void **, void *, const char *);
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                  void *, void **, void **);
} cu_api;

static void *cu_api_load(const char *lib_path, cu_api *a)
{
    void *lib = bench_cuda_mem_load(lib_path, &a->mem);
    if (!lib) return NULL;
    BENCH_CU_SYM(lib, "cuCtxSynchronize", a->sync);
    BENCH_CU_SYM(lib, "cuModuleLoadDataEx", a->load);
    BENCH_CU_SYM(lib, "cuModuleUnload", a->unload);
    BENCH_CU_SYM(lib, "cuModuleGetFunction", a->get_fn);
    BENCH_CU_SYM(lib, "cuLaunchKernel", a->launch);
    return lib;
}

/* Eight independent chains of fused multiply-adds, COUNT iterations a thread; the sum is stored
 * only if it is exactly 0, which it never is, so the compiler keeps the loop. */
static const char fma_ptx[] =
    ".version 6.0\n.target sm_60\n.address_size 64\n"
    ".visible .entry prs_fma_loop(.param .u32 prs_count, .param .u64 prs_out)\n{\n"
    ".reg .pred %p<3>;\n.reg .b32 %r<3>;\n.reg .f32 %f<12>;\n.reg .b64 %rd<2>;\n"
    "ld.param.u32 %r1, [prs_count];\nld.param.u64 %rd1, [prs_out];\n"
    "mov.u32 %r2, %tid.x;\ncvt.rn.f32.u32 %f1, %r2;\n"
    "add.f32 %f2, %f1, 0f3F800000;\nadd.f32 %f3, %f1, 0f40000000;\n"
    "add.f32 %f4, %f1, 0f40400000;\nadd.f32 %f5, %f1, 0f40800000;\n"
    "add.f32 %f6, %f1, 0f40A00000;\nadd.f32 %f7, %f1, 0f40C00000;\n"
    "add.f32 %f8, %f1, 0f40E00000;\nmov.f32 %f9, 0f3F7FFFEF;\nmov.f32 %f10, 0f3A83126F;\n"
    "setp.eq.u32 %p1, %r1, 0;\n@%p1 bra DONE;\nLOOP:\n"
    "fma.rn.f32 %f1, %f1, %f9, %f10;\nfma.rn.f32 %f2, %f2, %f9, %f10;\n"
    "fma.rn.f32 %f3, %f3, %f9, %f10;\nfma.rn.f32 %f4, %f4, %f9, %f10;\n"
    "fma.rn.f32 %f5, %f5, %f9, %f10;\nfma.rn.f32 %f6, %f6, %f9, %f10;\n"
    "fma.rn.f32 %f7, %f7, %f9, %f10;\nfma.rn.f32 %f8, %f8, %f9, %f10;\n"
    "sub.u32 %r1, %r1, 1;\nsetp.ne.u32 %p2, %r1, 0;\n@%p2 bra LOOP;\nDONE:\n"
    "add.f32 %f1, %f1, %f2;\nadd.f32 %f3, %f3, %f4;\nadd.f32 %f5, %f5, %f6;\n"
    "add.f32 %f7, %f7, %f8;\nadd.f32 %f1, %f1, %f3;\nadd.f32 %f5, %f5, %f7;\n"
    "add.f32 %f11, %f1, %f5;\nsetp.eq.f32 %p1, %f11, 0f00000000;\n"
    "@%p1 st.global.f32 [%rd1], %f11;\nret;\n}\n";

/* The work: the module, the buffer, and what one unit of each kind lasts (calibrated). */
typedef struct work {
    cu_api cu;
    prs_stream *s;
    void *mod, *fn;
    uint64_t buf;
    size_t words;
    double fma_iter_s, memset_s;
} work;

static int load_kernel(work *w)
{
    char log[2048] = "";
    int opts[2] = {5, 6}; /* CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    int rc = w->cu.load(&w->mod, fma_ptx, 2, opts, vals);
    if (rc) {
        printf("  the fma kernel did not load (CUDA error %d): %s\n", rc, log);
        return 1;
    }
    if ((rc = w->cu.get_fn(&w->fn, w->mod, "prs_fma_loop"))) {
        printf("  no prs_fma_loop in the module (CUDA error %d)\n", rc);
        return 1;
    }
    return 0;
}

static int launch_fma(work *w, unsigned count)
{
    uint64_t out = w->buf;
    void *params[2] = {&count, &out};
    return w->cu.launch(w->fn, GRID, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
}

/* Memsets in a computation of about seconds (at least one). */
static long memset_count(const work *w, double seconds)
{
    long n = lround(seconds / w->memset_s);
    return n < 1 ? 1 : n;
}

/* Enqueues one computation of kind k lasting about seconds. */
static int enqueue_kind(work *w, int k, double seconds)
{
    if (k == 0) {
        double n = seconds / w->fma_iter_s;
        return launch_fma(w, n < 1 ? 1u : n > 2e9 ? 2000000000u : (unsigned)n);
    }
    for (long i = 0, n = memset_count(w, seconds); i < n; i++)
        if (w->cu.mem.memset32(w->buf, (unsigned)i, w->words, NULL)) return -1;
    return 0;
}

/* Device seconds of one computation of kind k at the current calibration. */
static double time_kind(work *w, int k, double seconds)
{
    prs_event *a = NULL, *b = NULL;
    double t = NAN;
    if (!prs_event_new(w->s, &a) && !prs_event_new(w->s, &b) && !prs_event_record(w->s, a) &&
        !enqueue_kind(w, k, seconds) && !prs_event_record(w->s, b) && !prs_event_wait(w->s, b))
        prs_event_elapsed_s(w->s, a, b, &t);
    prs_event_free(w->s, a);
    prs_event_free(w->s, b);
    return t;
}

/* Scales each kind's unit until a computation planned for 20 ms lasts that (three rounds). */
static int calibrate(work *w)
{
    w->fma_iter_s = 1e-7;
    w->memset_s = 1e-3;
    for (int round = 0; round < 3; round++) {
        long n = memset_count(w, STEADY_MS / 1e3);
        double f = time_kind(w, 0, STEADY_MS / 1e3), m = time_kind(w, 1, STEADY_MS / 1e3);
        if (!(f > 0) || !(m > 0)) return 1;
        w->fma_iter_s *= f / (STEADY_MS / 1e3);
        w->memset_s = m / (double)n;
    }
    printf("  calibrated: fma %.4f ns an iteration (%d x 256 threads), a memset of %zu MiB "
           "%.3f ms\n",
           1e9 * w->fma_iter_s, GRID, w->words >> 18, 1e3 * w->memset_s);
    return 0;
}

/* ---- blocks of computations, put on the host clock ---- */

typedef struct comp {
    int kind;     /* 0 .. N_KINDS - 1, or KIND_BLOCKED: the stream waits dur_s between b and e */
    double gap_s; /* the stream waits this long before b (0: none) */
    double dur_s;
    prs_event *b, *e;
} comp;

typedef struct block {
    prs_event *anchor;
    volatile double note; /* CLOCK_MONOTONIC when the stream reached the anchor */
    int n;
    comp c[BLOCK_MAX];
} block;

/* Computations done, on the host clock, in stream order. */
typedef struct timeline {
    int *kind;
    double *t0, *t1;
    int n, cap;
} timeline;

typedef struct run_ctx {
    work *w;
    prs__client_sampler *smp;
    prs__client_sample *got; /* readings drained so far */
    int n_got;
    long lost;     /* readings past MAX_SAMPLES */
    long clamped;  /* computations whose start came before the last one's end (anchor jitter) */
    double wait_s; /* how long a block may take */
    unsigned seed;
} run_ctx;

static void sleep_for(void *user)
{
    struct timespec ts = prs_mono_timespec(*(const double *)user);
    nanosleep(&ts, NULL);
}

static void drain(run_ctx *r)
{
    prs__client_sample spill[256];
    int room = MAX_SAMPLES - r->n_got;
    if (room > 0) r->n_got += prs__client_sampler_drain(r->smp, r->got + r->n_got, room);
    if (r->n_got == MAX_SAMPLES) r->lost += prs__client_sampler_drain(r->smp, spill, 256);
}

/* Waits (draining the sampler) until e completed: 0, or -1 on an error or after r->wait_s. */
static int wait_for(run_ctx *r, prs_event *e)
{
    struct timespec ts = {0, 2000000};
    for (double end = prs_mono_s() + r->wait_s; prs_mono_s() < end;) {
        int q = prs_event_query(r->w->s, e);
        if (q) return q < 0 ? -1 : 0;
        drain(r);
        nanosleep(&ts, NULL);
    }
    printf("  timed out after %.0f s waiting for the GPU\n", r->wait_s);
    return -1;
}

static double uniform(run_ctx *r, double lo, double hi)
{
    return lo + (hi - lo) * rand_r(&r->seed) / (double)RAND_MAX;
}

/* The next computation of mode: a kind alone (steady), KIND_BLOCKED, or N_KINDS (the mix). */
static void plan_comp(run_ctx *r, const attrib_opts *o, int mode, double left, comp *c)
{
    c->gap_s = 0;
    if (mode == KIND_BLOCKED) {
        c->kind = KIND_BLOCKED;
        c->dur_s = left;
    } else if (mode < N_KINDS) {
        c->kind = mode;
        c->dur_s = STEADY_MS / 1e3;
    } else {
        c->kind = rand_r(&r->seed) % N_KINDS;
        c->dur_s = uniform(r, o->min_ms, o->max_ms) / 1e3;
        if (rand_r(&r->seed) % 2) c->gap_s = uniform(r, 0.05, 0.5) * o->max_ms / 1e3;
    }
}

static int enqueue_comp(work *w, comp *c)
{
    if (prs_event_new(w->s, &c->b) || prs_event_new(w->s, &c->e)) return -1;
    if (c->gap_s > 0 && prs_stream_host_fn(w->s, sleep_for, &c->gap_s)) return -1;
    if (prs_event_record(w->s, c->b)) return -1;
    int rc = c->kind == KIND_BLOCKED ? prs_stream_host_fn(w->s, sleep_for, &c->dur_s)
                                     : enqueue_kind(w, c->kind, c->dur_s);
    return rc || prs_event_record(w->s, c->e) ? -1 : 0;
}

/* Fills b with up to BLOCK_S of planned time (all of a blocked reference) and enqueues it behind
 * an anchor. Returns the planned seconds, or -1. */
static double enqueue_block(run_ctx *r, const attrib_opts *o, int mode, double left, block *b)
{
    memset(b, 0, sizeof *b);
    work *w = r->w;
    if (prs_event_new(w->s, &b->anchor) ||
        prs_stream_host_fn(w->s, bench_note_time, (void *)&b->note) ||
        prs_event_record(w->s, b->anchor))
        return -1;
    double planned = 0;
    while (b->n < BLOCK_MAX && planned < BLOCK_S && planned < left) {
        comp *c = &b->c[b->n++];
        plan_comp(r, o, mode, left - planned, c);
        if (enqueue_comp(w, c)) return -1;
        planned += c->gap_s + c->dur_s;
    }
    return planned;
}

/* Appends a computation; one that starts before the last one ended (each block is put on the
 * host clock through its own anchor, good to tens of microseconds) starts at that end. */
static int timeline_add(run_ctx *r, timeline *t, int kind, double t0, double t1)
{
    if (t->n && t0 < t->t1[t->n - 1]) {
        r->clamped++;
        t0 = t->t1[t->n - 1];
        if (t1 < t0) t1 = t0;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 1024;
        int *k = realloc(t->kind, sizeof(int) * (size_t)cap);
        if (k) t->kind = k;
        double *a = realloc(t->t0, sizeof(double) * (size_t)cap);
        if (a) t->t0 = a;
        double *z = realloc(t->t1, sizeof(double) * (size_t)cap);
        if (z) t->t1 = z;
        if (!k || !a || !z) return -1;
        t->cap = cap;
    }
    t->kind[t->n] = kind;
    t->t0[t->n] = t0;
    t->t1[t->n++] = t1;
    return 0;
}

/* Waits for b, puts its computations on the host clock and frees its events; with keep 0 (after
 * a failure), only frees them. */
static int collect_block(run_ctx *r, block *b, timeline *t, int keep)
{
    prs_stream *s = r->w->s;
    int rc = !keep ? -1 : b->n ? wait_for(r, b->c[b->n - 1].e) : 0;
    for (int i = 0; i < b->n; i++) {
        double d0, d1;
        if (!rc && !(rc = prs_event_elapsed_s(s, b->anchor, b->c[i].b, &d0)) &&
            !(rc = prs_event_elapsed_s(s, b->anchor, b->c[i].e, &d1)))
            rc = timeline_add(r, t, b->c[i].kind, b->note + d0, b->note + d1);
        prs_event_free(s, b->c[i].b);
        prs_event_free(s, b->c[i].e);
    }
    prs_event_free(s, b->anchor);
    return rc || !(b->note > 0) ? -1 : 0;
}

/* Runs mode for seconds, two blocks in flight, appending to t. 0 or -1. */
static int run_mode(run_ctx *r, const attrib_opts *o, int mode, double seconds, timeline *t)
{
    static block ring[2];
    int head = 0, in_flight = 0, rc = 0;
    double planned = 0;
    while (!rc && (planned < seconds || in_flight)) {
        if (planned < seconds && in_flight < 2) {
            double p = enqueue_block(r, o, mode, seconds - planned, &ring[(head + in_flight) % 2]);
            in_flight++;
            if (p < 0) rc = -1;
            planned += p;
            continue;
        }
        rc = collect_block(r, &ring[head], t, 1);
        head = (head + 1) % 2;
        in_flight--;
    }
    for (; in_flight > 0; in_flight--, head = (head + 1) % 2)
        collect_block(r, &ring[head], t, 0);
    if (rc) printf("  the stream failed: %s\n", prs_stream_errmsg(r->w->s));
    return rc;
}

/* ---- what the readings say ---- */

/* The readings dated by the client's refresh fit, in order (power mode: as read). */
static void map_readings(run_ctx *r, int power)
{
    static prs__client_refresh fit;
    prs__client_refresh_init(&fit);
    for (int i = 0; i < r->n_got && !power; i++)
        prs__client_refresh_map(&fit, &r->got[i].t_lo, &r->got[i].t_hi);
    printf("readings: %d (%ld lost), refresh fit period %.3f ms, %s\n", r->n_got, r->lost,
           1e3 * fit.period,
           power        ? "power mode"
           : fit.locked ? "locked"
                        : "not locked");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define STEADY_PIECE_S 0.05 /* the shortest piece of a steady run whose power is one estimate */
#define STEADY_GAP_S 5e-4   /* an idle gap between a run's computations that spoils a piece */
#define STEADY_LATE 1.1     /* a computation this many times the run's median had gaps inside */

/* A steady run: computations [from, to) of t, those of work lasting at most late_s. */
typedef struct run_span {
    const timeline *t;
    int from, to;
    double late_s;
} run_span;

/* Whether the run kept the device busy throughout [x0, x1]: no gap between its computations,
 * and none of work (a memset computation is many launches) lasting far past the others, as when
 * a host held up on a loaded machine enqueued the next launch after the device ran dry. */
static int busy_throughout(const run_span *s, double x0, double x1)
{
    const timeline *t = s->t;
    double cover = x0;
    for (int i = s->from; i < s->to && cover < x1; i++) {
        if (t->t1[i] <= cover) continue;
        if (t->t0[i] > cover + STEADY_GAP_S) return 0;
        if (t->t1[i] - t->t0[i] > s->late_s) return 0;
        cover = t->t1[i];
    }
    return cover >= x1;
}

/* The power over [a, b] from the readings wholly inside it: the median over pieces of at least
 * STEADY_PIECE_S between readings of the counter's change over the time between them (at least
 * three pieces), or the median power reading. A median, not the change from the first reading to
 * the last: one reading dated or integrated wrong (a sampler or a driver held up on a loaded
 * machine) moves one piece, not the reference. Pieces (power readings) where the device was not
 * busy with the run throughout (busy_throughout) count for nothing. NAN when there are too few. */
static double steady_power(const run_ctx *r, int power, const run_span *s, double a, double b)
{
    static double v[MAX_SAMPLES];
    int n = 0, from = -1;
    for (int i = 0; i < r->n_got; i++) {
        const prs__client_sample *x = &r->got[i];
        if (x->t_lo < a || x->t_hi > b) continue;
        if (power) {
            if (busy_throughout(s, x->t_lo, x->t_hi)) v[n++] = x->value;
            continue;
        }
        if (from < 0) {
            from = i;
            continue;
        }
        const prs__client_sample *y = &r->got[from];
        double dt = 0.5 * (x->t_lo + x->t_hi) - 0.5 * (y->t_lo + y->t_hi);
        if (dt < STEADY_PIECE_S) continue;
        if (busy_throughout(s, y->t_lo, x->t_hi)) v[n++] = (x->value - y->value) / dt;
        from = i;
    }
    if (n < (power ? 1 : 3)) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The steady power of a reference run in t[from, to): its last three quarters. */
static double reference(const run_ctx *r, int power, const timeline *t, int from, int to)
{
    if (to <= from) return NAN;
    static double d[MAX_SAMPLES];
    int n = 0;
    for (int i = from; i < to && n < MAX_SAMPLES; i++)
        if (t->kind[i] >= 0) d[n++] = t->t1[i] - t->t0[i];
    qsort(d, (size_t)n, sizeof *d, cmp_double);
    run_span s = {t, from, to, n ? STEADY_LATE * d[n / 2] : INFINITY};
    double a = t->t0[from], b = t->t1[to - 1];
    return steady_power(r, power, &s, a + 0.25 * (b - a), b);
}

/* The fit's unknowns: with a head length H > 0, the first H of each computation and of each
 * blocked gap after one are kinds of their own, where a GPU whose power lags its work shows it. */
enum { BLOCKED_HEAD = 2 * N_KINDS, FIT_KINDS = BLOCKED_HEAD + 1 };
#define HEAD_OF(k) (N_KINDS + (k))

typedef struct fit_result {
    double head_s;
    double kind_w[FIT_KINDS], idle_w;
    prs__client_attrib_quality q;
    int rc, n[N_KINDS];
    long refused; /* intervals and readings the attribution refused (none expected) */
    double busy_s[N_KINDS], span_s;
} fit_result;

/* Feeds computation i (and the blocked gap before it) of t to a; the calls a refused. */
static int feed_comp(prs__client_attrib *a, const timeline *t, int i, int first, double head)
{
    int k = t->kind[i], refused = 0;
    if (head > 0 && i > first && t->t0[i] > t->t1[i - 1]) {
        double end = t->t1[i - 1] + head;
        refused += prs__client_attrib_busy(a, BLOCKED_HEAD, t->t1[i - 1],
                                           end < t->t0[i] ? end : t->t0[i]) != 0;
    }
    double split = head > 0 ? t->t0[i] + head : t->t0[i];
    if (split > t->t1[i]) split = t->t1[i];
    if (split > t->t0[i]) refused += prs__client_attrib_busy(a, HEAD_OF(k), t->t0[i], split) != 0;
    if (t->t1[i] > split) refused += prs__client_attrib_busy(a, k, split, t->t1[i]) != 0;
    return refused;
}

/* The client's attribution over the mixed run t[from, to) (head 0: as the client fits it). */
static int fit_mixed(const run_ctx *r, int power, const timeline *t, int from, int to, double head,
                     fit_result *f)
{
    prs__client_attrib_opts ao;
    prs__client_attrib_opts_init(&ao);
    ao.max_rel_se = 0; /* the standard errors are reported, not judged */
    prs__client_attrib *a;
    if (to <= from || prs__client_attrib_new(head > 0 ? FIT_KINDS : N_KINDS, &ao, &a)) return -1;
    memset(f, 0, sizeof *f);
    f->head_s = head;
    for (int i = from; i < to; i++) {
        int k = t->kind[i];
        if (k < 0 || k >= N_KINDS) continue;
        f->refused += feed_comp(a, t, i, from, head);
        f->n[k]++;
        f->busy_s[k] += t->t1[i] - t->t0[i];
    }
    prs__client_attrib_known(a, t->t1[to - 1]);
    f->span_s = t->t1[to - 1] - t->t0[from];
    for (int i = 0; i < r->n_got; i++) {
        const prs__client_sample *x = &r->got[i];
        if (x->t_lo < t->t0[from]) continue; /* before the mixed run */
        int bad = power ? prs__client_attrib_power(a, x->t_lo, x->t_hi, x->value)
                        : prs__client_attrib_energy(a, x->t_lo, x->t_hi, x->value);
        f->refused += bad != 0;
    }
    f->rc = prs__client_attrib_solve(a, f->kind_w, &f->idle_w, &f->q);
    prs__client_attrib_free(a);
    return 0;
}

static void print_row(const char *name, double steady, double fitted, double se)
{
    printf("  %-22s %9.1f W %9.1f W %8.1f W %+9.2f %%\n", name, steady, fitted, se,
           100 * (fitted - steady) / steady);
}

static void print_fit(const fit_result *f)
{
    printf("  fit");
    if (f->head_s > 0) printf(" with the first %.1f ms apart", 1e3 * f->head_s);
    printf(": %ld rows, %ld readings used, %ld dropped, %ld refused, cond %.2f, rms %.3g, %s%s\n",
           f->q.rows, f->q.samples_used, f->q.samples_dropped, f->refused, f->q.cond, f->q.rms,
           f->rc == 0 ? "usable" : "not usable: ", f->q.why);
    printf("  %-22s %11s %11s %10s %11s\n", "", "steady", "fitted", "se", "fit-steady");
}

static void report(const fit_result *f, const double *steady, double blocked)
{
    print_fit(f);
    char name[64];
    for (int k = 0; k < N_KINDS; k++) {
        print_row(kind_name[k], steady[k], f->kind_w[k], f->q.kind_se_w[k]);
        if (f->head_s <= 0) continue;
        snprintf(name, sizeof name, "%s, first %.1f ms", kind_name[k], 1e3 * f->head_s);
        print_row(name, steady[k], f->kind_w[HEAD_OF(k)], f->q.kind_se_w[HEAD_OF(k)]);
    }
    if (f->head_s > 0) {
        snprintf(name, sizeof name, "blocked, first %.1f ms", 1e3 * f->head_s);
        print_row(name, blocked, f->kind_w[BLOCKED_HEAD], f->q.kind_se_w[BLOCKED_HEAD]);
    }
    print_row(f->head_s > 0 ? "blocked, the rest" : "blocked", blocked, f->idle_w, f->q.idle_se_w);
}

static int fit_and_report(const run_ctx *r, int power, const timeline *t, const int *marks,
                          const attrib_opts *o)
{
    double steady[N_KINDS];
    for (int k = 0; k < N_KINDS; k++)
        steady[k] = reference(r, power, t, marks[k], marks[k + 1]);
    double blocked = reference(r, power, t, marks[N_KINDS], marks[N_KINDS + 1]);
    int from = marks[N_KINDS + 1], to = marks[N_KINDS + 2], rc = 0;
    for (int pass = 0; pass < (o->head_ms > 0 ? 2 : 1); pass++) {
        fit_result f;
        if (fit_mixed(r, power, t, from, to, pass ? o->head_ms / 1e3 : 0, &f)) return 1;
        if (!pass) {
            printf("mixed: %d computations over %.1f s (", f.n[0] + f.n[1], f.span_s);
            for (int k = 0; k < N_KINDS; k++)
                printf("%s%s %d, %.0f %% of the time", k ? "; " : "", kind_name[k], f.n[k],
                       100 * f.busy_s[k] / f.span_s);
            printf("), %ld started before the previous one's end by the anchors' jitter\n",
                   r->clamped);
        }
        report(&f, steady, blocked);
        if (!pass) rc = f.rc != 0; /* the split fit is a diagnosis: it may not converge */
    }
    return rc;
}

/* ---- sections ---- */

/* 0 when the counter read is CUDA device 0's GPU (the one the work runs on). */
static int same_gpu(work *w, prs_gpu *g)
{
    char dev[96] = "", read[96] = "";
    if (prs_stream_device_uuid(w->s, dev, sizeof dev) || prs_gpu_uuid(g, read, sizeof read)) {
        printf("  cannot tell whether CUDA device 0 is the GPU read\n");
        return 1;
    }
    if (!strcmp(dev, read)) return 0;
    printf("  the energy counter read (%s) is not CUDA device 0's (%s): use --gpu nvml:uuid=%s\n",
           read, dev, dev);
    return 1;
}

static int open_work(const attrib_opts *o, prs_gpu *g, work *w)
{
    memset(w, 0, sizeof *w);
    const char *lib = o->cuda ? o->cuda : "libcuda.so.1";
    prs_error err;
    if (!cu_api_load(lib, &w->cu)) {
        if (w->cu.mem.alloc) printf("  %s lacks a call of CUDA modules or kernels\n", lib);
        return 1;
    }
    if (prs_stream_open_cuda(0, o->cuda, &w->s, &err)) {
        printf("  %s\n", err.msg);
        return 1;
    }
    if (same_gpu(w, g)) return 1;
    size_t bytes = (size_t)o->mib << 20;
    w->words = bytes / 4;
    if (w->cu.mem.alloc(&w->buf, bytes)) {
        printf("  cannot allocate %d MiB on the GPU\n", o->mib);
        return 1;
    }
    if (load_kernel(w)) return 1;
    if (!calibrate(w)) return 0;
    printf("  calibration failed: %s\n", prs_stream_errmsg(w->s));
    return 1;
}

/* After the work queued is done (a failure may leave some). */
static void close_work(work *w)
{
    if (w->cu.sync) w->cu.sync();
    if (w->buf) w->cu.mem.memfree(w->buf);
    if (w->mod) w->cu.unload(w->mod);
    prs_stream_close(w->s);
}

/* Runs everything, then stops the sampler; rc 0 when every run went through. */
static int run_all(run_ctx *r, const attrib_opts *o, timeline *t, int *marks)
{
    int rc = 0;
    for (int k = 0; k < N_KINDS && !rc; k++) {
        printf("steady: %s for %.1f s\n", kind_name[k], o->ref_s);
        marks[k] = t->n;
        rc = run_mode(r, o, k, o->ref_s, t);
    }
    marks[N_KINDS] = t->n;
    if (!rc) printf("steady: the stream blocked for %.1f s\n", o->ref_s);
    if (!rc) rc = run_mode(r, o, KIND_BLOCKED, o->ref_s, t);
    marks[N_KINDS + 1] = t->n;
    if (!rc)
        printf("mixed: %.0f to %.0f ms computations for %.1f s\n", o->min_ms, o->max_ms,
               o->seconds);
    if (!rc) rc = run_mode(r, o, N_KINDS, o->seconds, t);
    marks[N_KINDS + 2] = t->n;
    return rc;
}

static int measure(prs_gpu *g, const attrib_opts *o)
{
    static prs__client_sample got[MAX_SAMPLES];
    work w;
    run_ctx r = {.w = &w, .got = got, .seed = o->seed, .wait_s = WAIT_S + o->ref_s};
    timeline t = {0};
    int marks[N_KINDS + 3] = {0};
    if (prs__client_sampler_start(g, NULL, &r.smp)) {
        printf("sampler: cannot start: %s\n", prs_gpu_errmsg(g));
        return 1;
    }
    printf("work on CUDA device 0\n");
    int rc = open_work(o, g, &w) || run_all(&r, o, &t, marks);
    int power = prs__client_sampler_mode(r.smp) == PRS__CLIENT_SAMPLE_POWER;
    drain(&r);
    prs__client_sampler_stop(r.smp);
    close_work(&w);
    if (!rc) {
        map_readings(&r, power);
        rc = fit_and_report(&r, power, &t, marks, o);
    }
    free(t.kind);
    free(t.t0);
    free(t.t1);
    return rc ? 1 : 0;
}

/* ---- command line ---- */

static int usage(const char *why)
{
    fprintf(stderr,
            "gpu_attrib: %s\nusage: gpu_attrib [--gpu SPEC] [--cuda LIB] [--seconds S] "
            "[--ref-seconds R] [--min-ms A] [--max-ms B] [--head-ms H] [--mib M] [--seed N]\n",
            why);
    return 2;
}

static int parse_value(const char *k, const char *v, attrib_opts *o)
{
    char *end = NULL;
    if (!strcmp(k, "--gpu"))
        o->gpu = v;
    else if (!strcmp(k, "--cuda"))
        o->cuda = v;
    else if (!strcmp(k, "--seconds"))
        o->seconds = strtod(v, &end);
    else if (!strcmp(k, "--ref-seconds"))
        o->ref_s = strtod(v, &end);
    else if (!strcmp(k, "--min-ms"))
        o->min_ms = strtod(v, &end);
    else if (!strcmp(k, "--max-ms"))
        o->max_ms = strtod(v, &end);
    else if (!strcmp(k, "--head-ms"))
        o->head_ms = strtod(v, &end);
    else if (!strcmp(k, "--mib")) {
        long m = strtol(v, &end, 10);
        o->mib = m >= 1 && m <= 16384 ? (int)m : 0; /* 0: refused below */
    } else if (!strcmp(k, "--seed")) {
        unsigned long n = strtoul(v, &end, 10);
        if (*v < '0' || *v > '9' || n > 0xffffffffUL) return usage("--seed: 0 to 4294967295");
        o->seed = (unsigned)n;
    } else
        return usage("unknown option");
    return end && (*end || end == v) ? usage("a number is malformed") : 0;
}

static int parse(int argc, char **argv, attrib_opts *o)
{
    *o = (attrib_opts){.gpu = "nvml:0",
                       .seconds = 20,
                       .ref_s = 3,
                       .min_ms = 2,
                       .max_ms = 30,
                       .head_ms = -1,
                       .mib = 256,
                       .seed = 1};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) return usage("an option lacks its value");
        int rc = parse_value(argv[i], argv[i + 1], o);
        if (rc) return rc;
    }
    if (!(o->seconds >= 1 && o->seconds <= 600)) return usage("--seconds: 1 to 600");
    if (!(o->ref_s >= 1 && o->ref_s <= 60)) return usage("--ref-seconds: 1 to 60");
    if (!(o->min_ms >= 0.1 && o->max_ms >= o->min_ms && o->max_ms <= 200))
        return usage("--min-ms, --max-ms: 0.1 <= A <= B <= 200");
    if (o->head_ms < 0) o->head_ms = o->min_ms < 1 ? o->min_ms : 1;
    if (!(o->head_ms >= 0 && o->head_ms <= o->min_ms))
        return usage("--head-ms: 0 to the shortest computation (--min-ms)");
    if (o->mib < 1 || o->mib > 16384) return usage("--mib: 1 to 16384");
    return 0;
}

int main(int argc, char **argv)
{
    attrib_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    prs_gpu *g;
    prs_error err;
    if (prs_gpu_open(o.gpu, &g, &err)) {
        fprintf(stderr, "gpu_attrib: %s\n", err.msg);
        return 1;
    }
    printf("gpu_attrib on %s (%s)\n", prs_gpu_name(g), o.gpu);
    rc = measure(g, &o);
    prs_gpu_close(g);
    return rc;
}
