/* A fake libcuda.so.1 for the tests (fake_cuda.h has the interface and the semantics kept):
 * contexts, streams and events here, memory, modules and the launches of work in
 * fake_cuda_launch.c.
 *
 * Streams: a queue of operations (fakegpu_queue) behind a mutex, run in order by the stream's own
 * thread. Enqueueing takes the mutex, appends, and signals the thread only when it sleeps, so the
 * host pays tens of nanoseconds per call. The thread keeps the stream's device time in model
 * time: an operation starts at max(end of the previous one, the instant the host enqueued it),
 * a kernel then lasts what the GPU model of its device says (fakegpu_run_kernel_held sleeps until
 * absolute model deadlines), an event completes with the model instant it was reached as its
 * timestamp, and a host function runs on the thread (the stream waits for it: device time goes
 * on from the instant it returned, so a clock change it makes is in effect for the next kernel).
 * From the host's first enqueue until its queue is empty again the stream holds its device at
 * the model instant it stands at (fakegpu_hold): readers of the energy counter integrate no
 * further, so the changes a late thread enters at their model instants rewrite nothing a reader
 * got. */
#include "fake_cuda.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda_int.h"
#include "fake_gpu.h"
#include "fakegpu_queue.h"

#define EXPORT FAKECU_EXPORT

#define CU_STREAM_LEGACY ((CUstream)(uintptr_t)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)(uintptr_t)0x2)
#define CU_EVENT_VALID_FLAGS 0x7u /* blocking sync, disable timing, interprocess */

struct CUctx_st {
    int index;
    int refs;
    fakegpu_dev *dev;
    CUstream def;     /* default stream, made on first use */
    CUstream streams; /* every stream of the context, default included */
};

struct CUstream_st {
    CUcontext ctx;
    fakegpu_dev *dev; /* the context's */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the thread waits here for work */
    pthread_cond_t idle; /* cuStreamSynchronize waits here */
    fakegpu_queue q;     /* of op */
    uint64_t enqueued, done;
    int sleeping, sync_waiters, stop;
    int hostfn_pending; /* host functions enqueued and not yet returned */
    int record_waiters; /* cuEventRecord calls held back by them */
    int holding;        /* the stream holds its device (fakegpu_hold): work queued or running */
    int hold;           /* ... in this slot (-1: none free) */
    double t_dev;       /* model instant the last operation ended */
    double stall_s;     /* fakecuStall: host seconds the thread stalls before its next op */
    pthread_t thread;
    CUstream next;
};

struct CUevent_st {
    unsigned flags;
    _Atomic uint64_t recorded;  /* records enqueued */
    _Atomic uint64_t completed; /* the latest record reached */
    double ts;                  /* model instant of the completed record */
    double ts_of[8];            /* ... and of record seq at [seq % 8], for cross-stream waits */
};

struct barrier {
    char name[48];
    int parties, arrived;
    uint64_t generation;
    double latest;       /* latest arrival instant in the current generation */
    double released[16]; /* release instant of generation g at [g % 16] */
    struct barrier *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* contexts, barriers, statistics */
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;   /* event completions, barriers */
static _Atomic int g_event_waiters;
static _Atomic int g_initialized;
static int g_count;                     /* devices visible */
static int g_phys[FAKEGPU_MAX_DEVICES]; /* fake device of each ordinal */
static struct CUctx_st g_ctx[FAKEGPU_MAX_DEVICES];
static struct barrier *g_barriers;
static double g_busy_s, g_at_planned_s;
static int g_hostfn_depth = FAKECU_HOSTFN_DEPTH; /* $PRS_FAKE_CUDA_HOSTFN_DEPTH (0: no limit) */
static _Atomic long g_records_held;              /* records that waited for the depth */
static _Thread_local CUcontext t_current;

/* ---- errors ---- */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorName(CUresult r, const char **out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == r) {
            *out = errors[i].name;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == r) {
            *out = errors[i].text;
            return CUDA_SUCCESS;
        }
    *out = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- initialisation, devices, contexts ---- */

/* The fake device an entry of CUDA_VISIBLE_DEVICES names (an index, or a prefix of exactly one
 * device's "GPU-..." UUID), or -1. MIG instances are not modelled: invalid. */
static int visible_entry(const char *e, size_t len, int n)
{
    if (len == 0) return -1;
    if (len >= 4 && strncmp(e, "GPU-", 4) == 0) {
        int found = -1, matches = 0;
        for (int i = 0; i < n; i++) {
            fakegpu_dev *d = fakegpu_open(i);
            char u[64];
            if (!d) return -1;
            fakegpu_uuid_str(d, u, sizeof u);
            if (strlen(u) >= len && strncmp(u, e, len) == 0) {
                found = i;
                matches++;
            }
        }
        return matches == 1 ? found : -1;
    }
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (e[i] < '0' || e[i] > '9' || v > FAKEGPU_MAX_DEVICES) return -1;
        v = 10 * v + (e[i] - '0');
    }
    return v < n ? v : -1;
}

/* Fill g_phys as the driver reads CUDA_VISIBLE_DEVICES: unset, every device; otherwise the listed
 * ones in list order, up to the first invalid or repeated entry. Returns the count. */
static int visible_devices(void)
{
    int n = fakegpu_count(), count = 0;
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        for (int i = 0; i < n; i++)
            g_phys[i] = i;
        return n;
    }
    while (count < n) {
        size_t len = strcspn(v, ",");
        int d = visible_entry(v, len, n);
        for (int k = 0; d >= 0 && k < count; k++)
            if (g_phys[k] == d) d = -1;
        if (d < 0) break;
        g_phys[count++] = d;
        if (v[len] == '\0') break;
        v += len + 1;
    }
    return count;
}

/* Reads CUDA_VISIBLE_DEVICES once, like the driver; CUDA_ERROR_NO_DEVICE when it hides every
 * device (and again at every later cuInit). */
EXPORT CUresult cuInit(unsigned flags)
{
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    if (!atomic_load(&g_initialized)) {
        const char *depth = getenv("PRS_FAKE_CUDA_HOSTFN_DEPTH");
        if (depth && *depth) g_hostfn_depth = atoi(depth);
        g_count = visible_devices();
        for (int i = 0; i < g_count; i++)
            g_ctx[i].index = i;
        if (g_count > 0)
            atomic_store(&g_initialized, 1);
        else
            r = CUDA_ERROR_NO_DEVICE;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = 12080;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = g_count;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= g_count) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev)
{
    if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < g_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r) return r;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    fakegpu_dev *d = fakegpu_open(g_phys[dev]);
    snprintf(name, (size_t)len, "Fake CUDA %s", d ? fakegpu_preset(d)->name : "gpu");
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r) return r;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    fakegpu_dev *d = fakegpu_open(g_phys[dev]);
    if (!d) return CUDA_ERROR_UNKNOWN;
    unsigned char u[16];
    fakegpu_uuid(d, u);
    /* $PRS_FAKE_CUDA_MIG=1: the device is a MIG instance, named by a UUID of its own that NVML
     * does not list as a GPU */
    const char *mig = getenv("PRS_FAKE_CUDA_MIG");
    if (mig && *mig && strcmp(mig, "0") != 0) u[15] ^= 0xffu;
    memcpy(uuid->bytes, u, 16);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

static void stream_destroy(CUstream s);

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r) return r;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    CUcontext c = &g_ctx[dev];
    if (c->refs == 0) {
        /* A new primary context takes the device of the current environment. */
        c->dev = fakegpu_open(g_phys[dev]);
        if (!c->dev) {
            pthread_mutex_unlock(&g_mu);
            return CUDA_ERROR_UNKNOWN;
        }
    }
    c->refs++;
    pthread_mutex_unlock(&g_mu);
    *ctx = c;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = check_device(dev);
    if (r) return r;
    pthread_mutex_lock(&g_mu);
    CUcontext c = &g_ctx[dev];
    if (c->refs == 0) {
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    CUstream streams = NULL;
    if (--c->refs == 0) {
        streams = c->streams;
        c->streams = c->def = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    while (streams) {
        CUstream next = streams->next;
        stream_destroy(streams);
        streams = next;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

static int ctx_live(CUcontext c)
{
    return c && c >= g_ctx && c < g_ctx + g_count && c->refs > 0;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx && !ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    t_current = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = t_current;
    return CUDA_SUCCESS;
}

CUcontext fakecu__current(CUresult *r)
{
    if (!atomic_load(&g_initialized)) {
        *r = CUDA_ERROR_NOT_INITIALIZED;
        return NULL;
    }
    if (!ctx_live(t_current)) {
        *r = CUDA_ERROR_INVALID_CONTEXT;
        return NULL;
    }
    return t_current;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    CUresult r;
    CUcontext c = fakecu__current(&r);
    if (!c) return r;
    if (!dev) return CUDA_ERROR_INVALID_VALUE;
    *dev = c->index;
    return CUDA_SUCCESS;
}

/* ---- streams ---- */

static double now_s(void)
{
    return fakegpu_now_s();
}

/* The stream's hold on its device (fake_gpu.h) at model instant t: readers integrate the power
 * no further, as the stream may still enter a change there. INFINITY: nothing before a later
 * fakegpu_hold (the stream waits on the host or another stream). */
static void hold_at(CUstream s, double t)
{
    if (s->hold >= 0) fakegpu_hold(s->dev, s->hold, t);
}

/* Nothing queued: the stream enters no change until the host enqueues again (callers hold
 * s->mu). */
static void release_hold(CUstream s)
{
    if (!s->holding) return;
    fakegpu_unhold(s->dev, s->hold);
    s->hold = -1;
    s->holding = 0;
}

static void run_work(CUstream s, op *o, double start)
{
    double at = 0;
    double end =
        fakegpu_run_kernel_held(s->dev, s->hold, start, &o->u.work,
                                o->power_scale > 0 ? o->power_scale : 1, o->planned_mhz, &at);
    s->t_dev = end;
    if (o->planned_mhz > 0) {
        pthread_mutex_lock(&g_mu);
        g_busy_s += end - start;
        g_at_planned_s += at;
        pthread_mutex_unlock(&g_mu);
    }
}

static void run_event(CUstream s, op *o, double start)
{
    CUevent e = o->u.event.ev;
    e->ts = start;
    e->ts_of[o->u.event.seq % 8] = start;
    atomic_store(&e->completed, o->u.event.seq);
    s->t_dev = start + FAKECU_EVENT_S; /* what an event takes on the device */
    if (atomic_load(&g_event_waiters) > 0) {
        pthread_mutex_lock(&g_mu);
        pthread_cond_broadcast(&g_cv);
        pthread_mutex_unlock(&g_mu);
    }
}

/* The stream waits for the function: device time goes on from the instant it returned, so the
 * host's latency in running it counts, as on a GPU. */
static void run_hostfn(CUstream s, op *o, double start)
{
    hold_at(s, INFINITY); /* the device idles until a return instant that is still to come */
    o->u.host.fn(o->u.host.user);
    double t = fakegpu_hold_now(s->dev, &s->hold);
    s->t_dev = t > start ? t : start;
}

/* The stream waits (the device idles) until the other stream reached the record, and goes on
 * from the record's model instant, however late this thread learns of it. */
static void run_wait(CUstream s, op *o, double start)
{
    CUevent e = o->u.event.ev;
    uint64_t seq = o->u.event.seq;
    if (atomic_load(&e->completed) < seq) {
        hold_at(s, INFINITY);
        pthread_mutex_lock(&g_mu);
        atomic_fetch_add(&g_event_waiters, 1);
        while (atomic_load(&e->completed) < seq)
            pthread_cond_wait(&g_cv, &g_mu);
        atomic_fetch_sub(&g_event_waiters, 1);
        pthread_mutex_unlock(&g_mu);
    }
    double t = e->ts_of[seq % 8];
    s->t_dev = t > start ? t : start;
    hold_at(s, s->t_dev);
}

/* Every party goes on from the latest arrival's model instant. */
static void run_barrier(CUstream s, op *o, double start)
{
    struct barrier *b = o->u.barrier;
    hold_at(s, INFINITY);
    pthread_mutex_lock(&g_mu);
    uint64_t gen = b->generation;
    if (b->arrived == 0 || start > b->latest) b->latest = start;
    if (++b->arrived >= b->parties) {
        b->released[gen % 16] = b->latest;
        b->arrived = 0;
        b->generation++;
        pthread_cond_broadcast(&g_cv);
    }
    while (b->generation == gen)
        pthread_cond_wait(&g_cv, &g_mu);
    s->t_dev = b->released[gen % 16];
    pthread_mutex_unlock(&g_mu);
    hold_at(s, s->t_dev);
}

/* An operation starts at the model instant the previous one ended, or when the host enqueued it
 * if later: never when the thread happened to run, so a preempted thread stretches nothing. */
static void run_op(CUstream s, op *o)
{
    double start = s->t_dev > o->t_enq ? s->t_dev : o->t_enq;
    switch (o->kind) {
    case OP_WORK:
        run_work(s, o, start);
        break;
    case OP_EVENT:
        run_event(s, o, start);
        break;
    case OP_HOSTFN:
        run_hostfn(s, o, start);
        break;
    case OP_WAIT:
        run_wait(s, o, start);
        break;
    case OP_BARRIER:
        run_barrier(s, o, start);
        break;
    }
}

static void *stream_main(void *arg)
{
    CUstream s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->q.len == 0 && !s->stop) {
            release_hold(s);
            s->sleeping = 1;
            pthread_cond_wait(&s->wake, &s->mu);
            s->sleeping = 0;
        }
        op o;
        if (!fakegpu_queue_pop(&s->q, &o)) break;
        double stall = s->stall_s;
        s->stall_s = 0;
        pthread_mutex_unlock(&s->mu);
        if (stall > 0) { /* a preempted thread */
            struct timespec ts = {(time_t)stall, (long)((stall - floor(stall)) * 1e9)};
            nanosleep(&ts, NULL);
        }
        run_op(s, &o);
        pthread_mutex_lock(&s->mu);
        s->done++;
        if (o.kind == OP_HOSTFN) s->hostfn_pending--;
        if (s->sync_waiters || s->record_waiters) pthread_cond_broadcast(&s->idle);
    }
    release_hold(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static CUresult stream_new(CUcontext c, CUstream *out)
{
    CUstream s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    if (fakegpu_queue_init(&s->q, sizeof(op), 256)) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->ctx = c;
    s->dev = c->dev;
    s->hold = -1;
    s->t_dev = now_s();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (pthread_create(&s->thread, NULL, stream_main, s)) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->idle);
        fakegpu_queue_free(&s->q);
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = s;
    return CUDA_SUCCESS;
}

/* Wait for the queued work, stop the thread, free. */
static void stream_destroy(CUstream s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    if (s->sleeping) pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->idle);
    fakegpu_queue_free(&s->q);
    free(s);
}

EXPORT CUresult cuStreamCreate(CUstream *out, unsigned flags)
{
    CUresult r;
    CUcontext c = fakecu__current(&r);
    if (!c) return r;
    if (!out || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
    CUstream s;
    if ((r = stream_new(c, &s))) return r;
    pthread_mutex_lock(&g_mu);
    s->next = c->streams;
    c->streams = s;
    pthread_mutex_unlock(&g_mu);
    *out = s;
    return CUDA_SUCCESS;
}

CUstream fakecu__resolve(CUstream h, CUresult *r)
{
    if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) return h;
    CUcontext c = fakecu__current(r);
    if (!c) return NULL;
    pthread_mutex_lock(&g_mu);
    if (!c->def && (*r = stream_new(c, &c->def)) == CUDA_SUCCESS) {
        c->def->next = c->streams;
        c->streams = c->def;
    }
    CUstream s = c->def;
    pthread_mutex_unlock(&g_mu);
    if (!s) *r = CUDA_ERROR_OUT_OF_MEMORY;
    return s;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    if (!atomic_load(&g_initialized)) return CUDA_ERROR_NOT_INITIALIZED;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_mu);
    CUstream *p = &s->ctx->streams;
    while (*p && *p != s)
        p = &(*p)->next;
    int found = *p != NULL && s != s->ctx->def;
    if (found) *p = s->next;
    pthread_mutex_unlock(&g_mu);
    if (!found) return CUDA_ERROR_INVALID_HANDLE;
    stream_destroy(s);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy(CUstream s)
{
    return cuStreamDestroy_v2(s);
}

/* An idle stream (nothing queued or running) takes a hold on its device at the instant the
 * host enqueues, under the device's lock: the operation starts there, however late the thread
 * wakes, and no reader integrated past it. */
CUresult fakecu__enqueue(CUstream s, op *o)
{
    pthread_mutex_lock(&s->mu);
    if (!s->holding) {
        o->t_enq = fakegpu_hold_now(s->dev, &s->hold);
        s->holding = 1;
    } else {
        o->t_enq = now_s();
    }
    if (fakegpu_queue_push(&s->q, o)) {
        if (s->q.len == 0 && s->sleeping) release_hold(s);
        pthread_mutex_unlock(&s->mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (o->kind == OP_HOSTFN) s->hostfn_pending++;
    s->enqueued++;
    if (s->sleeping) pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream h)
{
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enqueued;
    s->sync_waiters++;
    while (s->done < target)
        pthread_cond_wait(&s->idle, &s->mu);
    s->sync_waiters--;
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

/* Waits for every stream of the current context. */
EXPORT CUresult cuCtxSynchronize(void)
{
    CUresult r;
    CUcontext c = fakecu__current(&r);
    if (!c) return r;
    pthread_mutex_lock(&g_mu);
    CUstream list[64];
    int n = 0;
    for (CUstream s = c->streams; s && n < 64; s = s->next)
        list[n++] = s;
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < n; i++)
        cuStreamSynchronize(list[i]);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *user)
{
    CUresult r = CUDA_SUCCESS;
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    op o = {.kind = OP_HOSTFN};
    o.u.host.fn = fn;
    o.u.host.user = user;
    return fakecu__enqueue(s, &o);
}

/* ---- events ---- */

EXPORT CUresult cuEventCreate(CUevent *out, unsigned flags)
{
    CUresult r;
    if (!fakecu__current(&r)) return r;
    if (!out || (flags & ~CU_EVENT_VALID_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    CUevent e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = flags;
    *out = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream h)
{
    CUresult r = CUDA_SUCCESS;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    /* As an H100's driver does (docs/gpu-check-h100.md): with FAKECU_HOSTFN_DEPTH host functions
     * pending on the stream, recording an event holds the host until one of them returned. */
    pthread_mutex_lock(&s->mu);
    if (g_hostfn_depth > 0 && s->hostfn_pending >= g_hostfn_depth) {
        atomic_fetch_add(&g_records_held, 1);
        s->record_waiters++;
        while (s->hostfn_pending >= g_hostfn_depth)
            pthread_cond_wait(&s->idle, &s->mu);
        s->record_waiters--;
    }
    pthread_mutex_unlock(&s->mu);
    op o = {.kind = OP_EVENT};
    o.u.event.ev = e;
    o.u.event.seq = atomic_fetch_add(&e->recorded, 1) + 1;
    return fakecu__enqueue(s, &o);
}

/* The stream waits for the latest record of e enqueued before this call (none: no wait). The
 * event may belong to another device. A stream's device time after the wait is the later of its
 * own and the record's instant. */
EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned flags)
{
    CUresult r = CUDA_SUCCESS;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~1u) return CUDA_ERROR_INVALID_VALUE;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    uint64_t seq = atomic_load(&e->recorded);
    if (seq == 0) return CUDA_SUCCESS;
    op o = {.kind = OP_WAIT};
    o.u.event.ev = e;
    o.u.event.seq = seq;
    return fakecu__enqueue(s, &o);
}

EXPORT CUresult cuEventQuery(CUevent e)
{
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    return atomic_load(&e->completed) == atomic_load(&e->recorded) ? CUDA_SUCCESS
                                                                   : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    uint64_t target = atomic_load(&e->recorded);
    if (atomic_load(&e->completed) >= target) return CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    atomic_fetch_add(&g_event_waiters, 1);
    while (atomic_load(&e->completed) < target)
        pthread_cond_wait(&g_cv, &g_mu);
    atomic_fetch_sub(&g_event_waiters, 1);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    cuEventSynchronize(e); /* queued records still point at it */
    free(e);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy(CUevent e)
{
    return cuEventDestroy_v2(e);
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
    if (atomic_load(&a->recorded) == 0 || atomic_load(&b->recorded) == 0 ||
        ((a->flags | b->flags) & FAKECU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    if (cuEventQuery(a) != CUDA_SUCCESS || cuEventQuery(b) != CUDA_SUCCESS)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)((b->ts - a->ts) * 1e3);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    return cuEventElapsedTime_v2(ms, a, b);
}

EXPORT CUresult fakecuEventTime(CUevent e, double *t_s)
{
    if (!t_s) return CUDA_ERROR_INVALID_VALUE;
    if (!e || atomic_load(&e->recorded) == 0 || (e->flags & FAKECU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    if (cuEventQuery(e) != CUDA_SUCCESS) return CUDA_ERROR_NOT_READY;
    *t_s = e->ts;
    return CUDA_SUCCESS;
}

EXPORT void fakecuClockShare(double *busy_s, double *at_planned_s)
{
    pthread_mutex_lock(&g_mu);
    if (busy_s) *busy_s = g_busy_s;
    if (at_planned_s) *at_planned_s = g_at_planned_s;
    pthread_mutex_unlock(&g_mu);
}

EXPORT long fakecuRecordsHeld(void)
{
    return atomic_load(&g_records_held);
}

EXPORT void fakecuResetStats(void)
{
    pthread_mutex_lock(&g_mu);
    g_busy_s = g_at_planned_s = 0;
    pthread_mutex_unlock(&g_mu);
}

EXPORT CUresult fakecuLaunchBarrier(CUstream h, const char *name, int parties)
{
    if (!name || strlen(name) >= sizeof g_barriers->name || parties < 1)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    pthread_mutex_lock(&g_mu);
    struct barrier *b;
    for (b = g_barriers; b; b = b->next)
        if (strcmp(b->name, name) == 0) break;
    if (!b && (b = calloc(1, sizeof *b)) != NULL) {
        snprintf(b->name, sizeof b->name, "%s", name);
        b->next = g_barriers;
        g_barriers = b;
    }
    if (b) b->parties = parties;
    pthread_mutex_unlock(&g_mu);
    if (!b) return CUDA_ERROR_OUT_OF_MEMORY;
    op o = {.kind = OP_BARRIER};
    o.u.barrier = b;
    return fakecu__enqueue(s, &o);
}

EXPORT CUresult fakecuStall(CUstream h, double seconds)
{
    if (!(seconds >= 0 && seconds < 60)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    pthread_mutex_lock(&s->mu);
    s->stall_s = seconds;
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}
