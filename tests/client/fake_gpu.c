/* The shared device state of the test fakes (fake_gpu.h has the model).
 *
 * Layout and concurrency: one fg_shared per device in a MAP_SHARED mapping. Its mutex is
 * process-shared and robust (a process killed while holding it does not wedge the others). The
 * word clock_seq counts clock changes; kernel threads sleep on it with an absolute-deadline futex
 * wait (shared, not private: the waiters may be in other processes), so a clock change wakes them
 * at once and a kernel's end is never later than its model end plus the scheduler's wake-up
 * delay, which is not accumulated: every deadline is computed from model instants.
 *
 * A new file is initialised by the first process that moves its `init` word from 0 to 1 (the
 * file is extended with zeros, so a fresh file reads 0); the others wait until it reads 2. */
#define _GNU_SOURCE /* syscall(), futex */
#include "fake_gpu.h"
#include "../rng.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FG_MAGIC 0x50524702u
#define FG_RING 4096 /* clock changes remembered (the limiter may make one every 10 ms) */
#define FG_SNAPS 128 /* refresh instants remembered (12.7 s at 100 ms, 1.27 s at 10 ms) */
#define FG_HOLDS 64  /* holders (streams) at once, all processes together */

typedef struct fg_hold {
    long pid; /* 0: free */
    double t; /* the holder enters no power change before this model instant */
} fg_hold;

typedef struct fg_change {
    double t; /* CLOCK_MONOTONIC instant of the change */
    int mhz;  /* clock in effect from then on */
} fg_change;

typedef struct fg_snap {
    double t, e; /* a refresh instant and the integral of the power up to it */
} fg_snap;

typedef struct fg_shared {
    _Atomic uint32_t init;      /* 0: new, 1: being initialised, 2: ready */
    _Atomic uint32_t clock_seq; /* futex word: bumped at every clock change */
    _Atomic uint32_t hold_seq;  /* futex word: bumped when a hold moves, for waiting readers */
    uint32_t magic;
    uint32_t size;
    pthread_mutex_t mu;
    /* configuration, fixed at creation */
    int index;
    char preset[32];
    unsigned char uuid[16];
    double refresh_s, phase_s, noise;
    double limit_w; /* power limit the clock is held under while a kernel runs (0: none) */
    /* the power limiter (under mu; fake_gpu.h, fakegpu_power_limit_w) */
    double lim_t0;  /* control instants lim_t0 + k * FAKEGPU_LIMIT_STEP_S (0: not started) */
    uint64_t lim_k; /* the next one's k */
    double lim_avg; /* the power averaged up to t_last */
    double lim_cap; /* the power a running kernel may draw, set at the latest control instant */
    /* clock (under mu) */
    unsigned locked_min, locked_max;
    uint64_t nchanges; /* change k lives in ring[k % FG_RING]; change 0 is the initial clock */
    fg_change ring[FG_RING];
    /* power and energy (under mu) */
    uint64_t rng;
    int kernels_seen, running;
    double kfac, ifac; /* noise factors of the latest kernel and of the current idle stretch */
    double t_last;     /* the integral is known up to here */
    double busy_until; /* model instant the running kernel ends (at the clock in effect) */
    double energy_j;   /* integral of the power up to t_last */
    double snap_t;     /* latest refresh instant <= t_last, and the integral there */
    double snap_e;
    int snap_seen;   /* a reader got snap_e: it is final, corrections go to the next refresh */
    uint64_t nsnaps; /* refresh instants passed; snapshot k lives in snaps[k % FG_SNAPS] */
    fg_snap snaps[FG_SNAPS]; /* the exact integral at each, for the averaged power reading */
    double reported_j;       /* largest value a reader got */
    fg_hold holds[FG_HOLDS]; /* readers integrate no further than the earliest (under mu) */
    int hold_waiters;        /* readers waiting for a hold to move (under mu) */
    /* which processes made which calls (under mu) */
    int ntouchers;
    fakegpu_toucher touchers[FAKEGPU_MAX_TOUCHERS];
} fg_shared;

struct fakegpu_dev {
    fg_shared *sh;
    const prs_gpu_preset *preset;
    int index;
    char dir[512];
    struct fakegpu_dev *next;
};

static pthread_mutex_t g_open_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fakegpu_dev *g_devs;

FAKEGPU_API double fakegpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double env_double(const char *name, double def)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    double x = strtod(v, &end);
    return end != v && isfinite(x) ? x : def;
}

FAKEGPU_API int fakegpu_count(void)
{
    const char *v = getenv("PRS_FAKE_NVML_DEVICES");
    double n = env_double(v && *v ? "PRS_FAKE_NVML_DEVICES" : "PRS_FAKE_GPU_COUNT", 1);
    if (n < 1) return 1;
    return n > FAKEGPU_MAX_DEVICES ? FAKEGPU_MAX_DEVICES : (int)n;
}

/* 1 + noise·z, z uniform with zero mean and unit variance; kept positive. */
static double noise_factor(fg_shared *s)
{
    if (s->noise <= 0) return 1.0;
    double u = prs_test_rng_unif(&s->rng);
    double f = 1.0 + s->noise * sqrt(3.0) * (2.0 * u - 1.0);
    return f > 0.05 ? f : 0.05;
}

static void lock(fg_shared *s)
{
    if (pthread_mutex_lock(&s->mu) == EOWNERDEAD) pthread_mutex_consistent(&s->mu);
}

static void unlock(fg_shared *s)
{
    pthread_mutex_unlock(&s->mu);
}

/* The clock asked for: the locked one, else f_max. */
static int asked_mhz(const fakegpu_dev *d)
{
    return d->sh->locked_max ? (int)d->sh->locked_max : d->preset->f_max_mhz;
}

/* The clock in effect: the one asked for, or, under a power limit while a kernel runs, the
 * highest clock of the grid below it at which the kernel's power fits what the limiter allows
 * (as a GPU's firmware holds its clock under the board's power limit, locked or not). */
static int effective_mhz(const fakegpu_dev *d)
{
    int f = asked_mhz(d);
    const fg_shared *s = d->sh;
    if (!(s->limit_w > 0) || s->running <= 0) return f;
    const prs_gpu_preset *p = d->preset;
    while (f - p->f_step_mhz >= p->f_min_mhz && prs_gpu_power_w(p, f) * s->kfac > s->lim_cap)
        f -= p->f_step_mhz;
    return f;
}

/* Record a change of the clock in effect (callers hold the lock; t not before the last change). */
static int note_clock(fg_shared *s, double t, int mhz)
{
    const fg_change *last = &s->ring[(s->nchanges - 1) % FG_RING];
    if (last->mhz == mhz) return 0;
    fg_change *c = &s->ring[s->nchanges % FG_RING];
    c->t = t > last->t ? t : last->t;
    c->mhz = mhz;
    s->nchanges++;
    atomic_fetch_add(&s->clock_seq, 1);
    return 1;
}

static void init_shared(fg_shared *s, int index, const char *dir)
{
    memset((char *)s + offsetof(fg_shared, magic), 0, sizeof *s - offsetof(fg_shared, magic));
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mu, &a);
    pthread_mutexattr_destroy(&a);
    s->index = index;
    const char *pn = getenv("PRS_FAKE_NVML_PRESET");
    const prs_gpu_preset *p = prs_gpu_preset_find(pn && *pn ? pn : "a100");
    if (!p) p = prs_gpu_preset_find("a100");
    snprintf(s->preset, sizeof s->preset, "%s", p->name);
    /* The UUID depends on the directory (a "host") and the index, nothing else. */
    uint64_t h = 1469598103934665603u;
    for (const char *c = dir; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211u;
    uint64_t x = h + (uint64_t)index * 7919u;
    uint64_t u0 = prs_test_rng_next(&x), u1 = prs_test_rng_next(&x);
    memcpy(s->uuid, &u0, 8);
    memcpy(s->uuid + 8, &u1, 8);
    double r = env_double("PRS_FAKE_NVML_REFRESH_MS", 0);
    s->refresh_s = r > 0 ? r * 1e-3 : 0;
    /* A different phase of the refresh instants on every device (golden-ratio steps). */
    double ph = fmod(0.6180339887498949 * (index + 1), 1.0);
    s->phase_s = s->refresh_s * ph;
    s->limit_w = env_double("PRS_FAKE_NVML_POWER_LIMIT_W", 0);
    double nz = env_double("PRS_FAKE_NVML_NOISE", 0);
    s->noise = nz > 0 ? (nz < 0.5 ? nz : 0.5) : 0;
    s->rng = (uint64_t)env_double("PRS_FAKE_NVML_SEED", 1) * 1000003u + (uint64_t)index;
    double now = fakegpu_now_s();
    s->nchanges = 1;
    s->ring[0].t = now;
    s->ring[0].mhz = p->f_max_mhz;
    s->kfac = s->ifac = 1.0;
    s->t_last = now;
    s->snap_t = now;
    s->magic = FG_MAGIC;
    s->size = (uint32_t)sizeof *s;
    atomic_store(&s->clock_seq, 1);
}

/* Wait for, or do, the initialisation of a mapped state. */
static void ensure_init(fg_shared *s, int index, const char *dir)
{
    double t0 = fakegpu_now_s();
    for (;;) {
        uint32_t st = atomic_load(&s->init);
        if (st == 2 && s->magic == FG_MAGIC && s->size == sizeof *s) return;
        uint32_t expect = st;
        /* New (0), left half-done by a dead process (1 for over a second), or an older layout
         * (2 with another magic): take it. */
        if ((st == 0 || (st == 1 && fakegpu_now_s() - t0 > 1.0) || st == 2) &&
            atomic_compare_exchange_strong(&s->init, &expect, 1)) {
            init_shared(s, index, dir);
            atomic_store(&s->init, 2);
            return;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* poll interval: another process initialises it */
    }
}

static fg_shared *map_state(int index, const char *dir)
{
    void *m;
    if (!*dir) {
        m = mmap(NULL, sizeof(fg_shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                 0);
    } else {
        char path[640];
        int n = snprintf(path, sizeof path, "%s/gpu%d.state", dir, index);
        if (n <= 0 || (size_t)n >= sizeof path) return NULL;
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return NULL;
        struct stat st;
        if (fstat(fd, &st) ||
            (st.st_size < (off_t)sizeof(fg_shared) && ftruncate(fd, (off_t)sizeof(fg_shared)))) {
            close(fd);
            return NULL;
        }
        m = mmap(NULL, sizeof(fg_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
    }
    if (m == MAP_FAILED) return NULL;
    ensure_init(m, index, dir);
    return m;
}

FAKEGPU_API fakegpu_dev *fakegpu_open(int index)
{
    if (index < 0 || index >= fakegpu_count()) return NULL;
    const char *dir = getenv("PRS_FAKE_GPU_DIR");
    if (!dir) dir = "";
    if (strlen(dir) >= sizeof g_devs->dir) return NULL;
    pthread_mutex_lock(&g_open_mu);
    fakegpu_dev *d;
    for (d = g_devs; d; d = d->next)
        if (d->index == index && strcmp(d->dir, dir) == 0) break;
    if (!d && (d = calloc(1, sizeof *d)) != NULL) {
        d->sh = map_state(index, dir);
        if (!d->sh) {
            free(d);
            d = NULL;
        } else {
            d->index = index;
            snprintf(d->dir, sizeof d->dir, "%s", dir);
            d->preset = prs_gpu_preset_find(d->sh->preset);
            if (!d->preset) d->preset = prs_gpu_preset_find("a100");
            d->next = g_devs;
            g_devs = d;
        }
    }
    pthread_mutex_unlock(&g_open_mu);
    return d;
}

FAKEGPU_API int fakegpu_index(const fakegpu_dev *d)
{
    return d->index;
}

FAKEGPU_API const prs_gpu_preset *fakegpu_preset(const fakegpu_dev *d)
{
    return d->preset;
}

FAKEGPU_API void fakegpu_uuid(const fakegpu_dev *d, unsigned char out[16])
{
    memcpy(out, d->sh->uuid, 16);
}

FAKEGPU_API void fakegpu_uuid_str(const fakegpu_dev *d, char *buf, size_t n)
{
    const unsigned char *u = d->sh->uuid;
    snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

/* ---- who touched the device ---- */

FAKEGPU_API void fakegpu_touch(fakegpu_dev *d, fakegpu_call call)
{
    if ((int)call < 0 || call >= FAKEGPU_NCALLS) return;
    fg_shared *s = d->sh;
    long pid = (long)getpid();
    lock(s);
    int i = 0;
    while (i < s->ntouchers && s->touchers[i].pid != pid)
        i++;
    if (i == s->ntouchers) {
        if (i == FAKEGPU_MAX_TOUCHERS) {
            i = FAKEGPU_MAX_TOUCHERS - 1; /* the overflow entry */
            s->touchers[i].pid = -1;
        } else {
            s->touchers[i].pid = pid;
            s->ntouchers++;
        }
    }
    s->touchers[i].calls[call]++;
    unlock(s);
}

FAKEGPU_API int fakegpu_touchers(fakegpu_dev *d, fakegpu_toucher *out, int cap)
{
    fg_shared *s = d->sh;
    lock(s);
    int n = s->ntouchers;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = s->touchers[i];
    unlock(s);
    return n;
}

/* ---- holds: model instants readers wait for ---- */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts,
                  uint32_t mask)
{
    return syscall(SYS_futex, (void *)w, op, val, ts, NULL, mask);
}

static struct timespec to_timespec(double t)
{
    struct timespec ts;
    ts.tv_sec = (time_t)floor(t);
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* A hold moved (callers hold the lock): wake the waiting readers after unlocking if it says so. */
static int hold_moved(fg_shared *s)
{
    atomic_fetch_add(&s->hold_seq, 1);
    return s->hold_waiters > 0;
}

static void wake_readers(fg_shared *s)
{
    futex(&s->hold_seq, FUTEX_WAKE, INT_MAX, NULL, 0);
}

/* Set slot's hold to t (callers hold the lock); a slot < 0 takes a free one. Returns the slot,
 * -1 when the table is full (then nothing is held: a late change is corrected backwards). */
static int hold_locked(fg_shared *s, int slot, double t)
{
    if (slot < 0 || slot >= FG_HOLDS) {
        for (slot = 0; slot < FG_HOLDS && s->holds[slot].pid; slot++)
            ;
        if (slot == FG_HOLDS) return -1;
    }
    s->holds[slot].pid = (long)getpid();
    s->holds[slot].t = t;
    return slot;
}

FAKEGPU_API int fakegpu_hold(fakegpu_dev *d, int slot, double t)
{
    lock(d->sh);
    slot = hold_locked(d->sh, slot, t);
    int wake = hold_moved(d->sh);
    unlock(d->sh);
    if (wake) wake_readers(d->sh);
    return slot;
}

FAKEGPU_API double fakegpu_hold_now(fakegpu_dev *d, int *slot)
{
    lock(d->sh);
    double now = fakegpu_now_s(); /* under the lock: no reader integrated past it */
    *slot = hold_locked(d->sh, *slot, now);
    int wake = hold_moved(d->sh);
    unlock(d->sh);
    if (wake) wake_readers(d->sh);
    return now;
}

FAKEGPU_API void fakegpu_unhold(fakegpu_dev *d, int slot)
{
    if (slot < 0 || slot >= FG_HOLDS) return;
    lock(d->sh);
    d->sh->holds[slot].pid = 0;
    int wake = hold_moved(d->sh);
    unlock(d->sh);
    if (wake) wake_readers(d->sh);
}

/* ---- power and energy (callers hold the lock) ---- */

static double power_locked(const fakegpu_dev *d)
{
    const fg_shared *s = d->sh;
    if (!s->kernels_seen) return prs_gpu_power_w(d->preset, effective_mhz(d));
    if (s->running > 0) return prs_gpu_power_w(d->preset, effective_mhz(d)) * s->kfac;
    return d->preset->blocking_power_w * s->ifac;
}

/* Integrate power p from t_last to t (>= t_last), keeping the value at the latest refresh
 * instant passed. */
static void integrate(fg_shared *s, double t, double p)
{
    if (s->refresh_s > 0) {
        double r = s->phase_s + floor((t - s->phase_s) / s->refresh_s) * s->refresh_s;
        if (r > s->t_last) {
            s->snap_e = s->energy_j + p * (r - s->t_last);
            s->snap_t = r;
            s->snap_seen = 0;
        }
        /* Every refresh instant passed, the last FG_SNAPS of them at most. */
        double first =
            fmax(r - (FG_SNAPS - 1) * s->refresh_s,
                 s->phase_s + ceil((s->t_last - s->phase_s) / s->refresh_s) * s->refresh_s);
        for (double q = first; q <= r + 1e-12 && q > s->t_last - 1e-12; q += s->refresh_s) {
            if (s->nsnaps && q <= s->snaps[(s->nsnaps - 1) % FG_SNAPS].t + 1e-9) continue;
            s->snaps[s->nsnaps % FG_SNAPS] = (fg_snap){q, s->energy_j + p * (q - s->t_last)};
            s->nsnaps++;
        }
    }
    s->energy_j += p * (t - s->t_last);
    if (s->lim_t0 > 0)
        s->lim_avg = p + (s->lim_avg - p) * exp(-(t - s->t_last) / FAKEGPU_LIMIT_TAU_S);
    s->t_last = t;
}

/* The limiter's control instant k. */
static double lim_instant(const fg_shared *s, uint64_t k)
{
    return s->lim_t0 + (double)k * FAKEGPU_LIMIT_STEP_S;
}

/* The limiter's next control instant (INFINITY when it has not started). */
static double lim_next(const fg_shared *s)
{
    return s->lim_t0 > 0 ? lim_instant(s, s->lim_k) : INFINITY;
}

/* What the limiter lets a running kernel draw, from the power averaged so far. */
static double lim_cap_of(const fg_shared *s)
{
    return fmax(0.0, s->limit_w + FAKEGPU_LIMIT_GAIN * (s->limit_w - s->lim_avg));
}

/* The limiter starts with the first kernel, at its start t, from the blocking power. */
static void lim_start(fakegpu_dev *d, double t)
{
    fg_shared *s = d->sh;
    if (!(s->limit_w > 0) || s->lim_t0 > 0) return;
    s->lim_t0 = t;
    s->lim_k = 1;
    s->lim_avg = d->preset->blocking_power_w;
    s->lim_cap = lim_cap_of(s);
}

/* Integrate the power up to t (>= t_last), running the limiter's control instants up to t on
 * the way (all of them: only the last one while no kernel runs, the clock then not depending on
 * it). Returns 1 when the clock in effect changed. */
static int advance(fakegpu_dev *d, double t)
{
    fg_shared *s = d->sh;
    int changed = 0;
    for (double tk; (tk = lim_next(s)) <= t; s->lim_k++) {
        if (s->running <= 0) {
            uint64_t k = (uint64_t)floor((t - s->lim_t0) / FAKEGPU_LIMIT_STEP_S);
            while (k > s->lim_k && lim_instant(s, k) > t)
                k--;
            if (k > s->lim_k) s->lim_k = k;
            tk = lim_instant(s, s->lim_k);
        }
        if (tk > s->t_last) integrate(s, tk, power_locked(d));
        s->lim_cap = lim_cap_of(s);
        changed |= note_clock(s, tk, effective_mhz(d));
    }
    if (t > s->t_last) integrate(s, t, power_locked(d));
    return changed;
}

/* A change of the power at model instant t: call before (returns the old power) and after.
 * *woke is set when the limiter changed the clock on the way to t. */
static double change_begin(fakegpu_dev *d, double t, int *woke)
{
    if (t >= d->sh->t_last && advance(d, t)) *woke = 1;
    return power_locked(d);
}

static void change_end(fakegpu_dev *d, double t, double p_old)
{
    fg_shared *s = d->sh;
    if (t >= s->t_last) return;
    /* A reader integrated past t at the old power: correct (t, t_last]. */
    double dp = power_locked(d) - p_old;
    s->energy_j += dp * (s->t_last - t);
    if (s->lim_t0 > 0) s->lim_avg += dp * (1.0 - exp(-(s->t_last - t) / FAKEGPU_LIMIT_TAU_S));
    if (s->refresh_s > 0 && s->snap_t > t && !s->snap_seen) s->snap_e += dp * (s->snap_t - t);
    for (uint64_t k = s->nsnaps > FG_SNAPS ? s->nsnaps - FG_SNAPS : 0; k < s->nsnaps; k++)
        if (s->snaps[k % FG_SNAPS].t > t)
            s->snaps[k % FG_SNAPS].e += dp * (s->snaps[k % FG_SNAPS].t - t);
}

/* The instant up to which the power is known: now, or the earliest hold of a live holder
 * before it (callers hold the lock). A hold over a second behind now is checked for a dead
 * process (a killed test) and dropped if so. */
static double horizon(fg_shared *s, double now)
{
    double h = now;
    for (int i = 0; i < FG_HOLDS; i++) {
        fg_hold *k = &s->holds[i];
        if (!k->pid || k->t >= h) continue;
        if (k->t < now - 1.0 && k->pid != (long)getpid() && kill((pid_t)k->pid, 0) &&
            errno == ESRCH) {
            k->pid = 0;
            continue;
        }
        h = k->t;
    }
    return h;
}

/* Lock s once every holder stands at or past the instant the read began (a stream thread that
 * runs late catches up with the model), or FAKEGPU_READ_WAIT_S passed; returns that instant. A
 * reading so answers with the model's state at its instant, and takes longer when a stream's
 * thread was late, as a read that the driver held up. */
static double lock_caught_up(fg_shared *s)
{
    double now = fakegpu_now_s(), until = now + FAKEGPU_READ_WAIT_S;
    lock(s);
    while (horizon(s, now) < now && fakegpu_now_s() < until) {
        uint32_t seq = atomic_load(&s->hold_seq);
        s->hold_waiters++;
        unlock(s);
        struct timespec ts = to_timespec(until);
        futex(&s->hold_seq, FUTEX_WAIT_BITSET, seq, &ts, FUTEX_BITSET_MATCH_ANY);
        lock(s);
        s->hold_waiters--;
    }
    return now;
}

static double read_locked(fakegpu_dev *d, int quantised, double now, int *woke)
{
    fg_shared *s = d->sh;
    /* Up to the horizon: a stream whose thread runs late enters its changes at their model
     * instants, which readers must not have integrated past. */
    now = horizon(s, now);
    /* A kernel's end is settled by its stream's thread, which may wake after the instant: never
     * integrate busy power past the instant the kernel ends (the thread corrects nothing then,
     * and readings already handed out stay right). */
    if (s->running > 0 && s->busy_until < now) now = s->busy_until;
    if (now > s->t_last && advance(d, now)) *woke = 1;
    if (!quantised) return s->energy_j;
    double v = s->refresh_s > 0 ? s->snap_e : s->energy_j;
    s->snap_seen = 1;
    if (v < s->reported_j) v = s->reported_j;
    s->reported_j = v;
    return v;
}

/* Unlock, and wake the kernel threads when the clock changed. */
static void unlock_wake(fg_shared *s, int woke)
{
    unlock(s);
    if (woke) futex(&s->clock_seq, FUTEX_WAKE, INT_MAX, NULL, 0);
}

FAKEGPU_API double fakegpu_energy_j(fakegpu_dev *d)
{
    double now = lock_caught_up(d->sh);
    int woke = 0;
    double v = read_locked(d, 1, now, &woke);
    unlock_wake(d->sh, woke);
    return v;
}

FAKEGPU_API double fakegpu_energy_exact_j(fakegpu_dev *d)
{
    double now = lock_caught_up(d->sh);
    int woke = 0;
    double v = read_locked(d, 0, now, &woke);
    unlock_wake(d->sh, woke);
    return v;
}

/* Under a limiter: its control instants up to now run before a reading of the power or the
 * clock, so these are the model's at the reading's instant. */
static int lim_caught_up(fakegpu_dev *d, double now)
{
    int woke = 0;
    if (d->sh->lim_t0 > 0) read_locked(d, 0, now, &woke);
    return woke;
}

FAKEGPU_API double fakegpu_power_w(fakegpu_dev *d)
{
    double now = lock_caught_up(d->sh);
    int woke = lim_caught_up(d, now);
    double p = power_locked(d);
    unlock_wake(d->sh, woke);
    return p;
}

FAKEGPU_API double fakegpu_power_avg_w(fakegpu_dev *d, double window_s)
{
    double now = lock_caught_up(d->sh);
    fg_shared *s = d->sh;
    int woke = 0;
    /* integrate up to now: every refresh instant passed is a snapshot */
    read_locked(d, 0, now, &woke);
    double p = power_locked(d);
    if (s->refresh_s > 0 && s->nsnaps >= 2) {
        uint64_t last = s->nsnaps - 1, back = (uint64_t)lround(window_s / s->refresh_s);
        uint64_t oldest = s->nsnaps > FG_SNAPS ? s->nsnaps - FG_SNAPS : 0;
        uint64_t from = last >= back && last - back >= oldest ? last - back : oldest;
        const fg_snap *a = &s->snaps[from % FG_SNAPS], *b = &s->snaps[last % FG_SNAPS];
        if (b->t > a->t) p = (b->e - a->e) / (b->t - a->t);
    }
    unlock_wake(d->sh, woke);
    return p;
}

FAKEGPU_API double fakegpu_power_limit_w(const fakegpu_dev *d)
{
    return d->sh->limit_w; /* fixed at creation */
}

FAKEGPU_API void fakegpu_refresh(const fakegpu_dev *d, double *period_s, double *phase_s)
{
    *period_s = d->sh->refresh_s; /* fixed at creation */
    *phase_s = d->sh->phase_s;
}

/* ---- clock ---- */

FAKEGPU_API void fakegpu_set_locked(fakegpu_dev *d, unsigned min_mhz, unsigned max_mhz)
{
    fg_shared *s = d->sh;
    lock(s);
    double now = fakegpu_now_s();
    int woke = 0;
    double p = change_begin(d, now, &woke);
    int before = effective_mhz(d);
    s->locked_min = min_mhz;
    s->locked_max = max_mhz;
    int after = effective_mhz(d);
    change_end(d, now, p);
    if (after != before && note_clock(s, now, after)) woke = 1;
    unlock_wake(s, woke);
}

FAKEGPU_API void fakegpu_locked(fakegpu_dev *d, unsigned *min_mhz, unsigned *max_mhz)
{
    lock(d->sh);
    *min_mhz = d->sh->locked_min;
    *max_mhz = d->sh->locked_max;
    unlock(d->sh);
}

FAKEGPU_API int fakegpu_clock_mhz(fakegpu_dev *d)
{
    lock(d->sh);
    int running = d->sh->lim_t0 > 0; /* set by the first kernel's stream thread */
    if (!running) {                  /* no limiter running: the state as it is */
        int f = effective_mhz(d);
        unlock(d->sh);
        return f;
    }
    unlock(d->sh);
    double now = lock_caught_up(d->sh);
    int woke = lim_caught_up(d, now);
    int f = effective_mhz(d);
    unlock_wake(d->sh, woke);
    return f;
}

FAKEGPU_API int fakegpu_clock_changes(fakegpu_dev *d, double *t, int *mhz, int cap)
{
    fg_shared *s = d->sh;
    lock(s);
    uint64_t from = s->nchanges > FG_RING ? s->nchanges - FG_RING : 0;
    if (cap < 0) cap = 0;
    if (s->nchanges - from > (uint64_t)cap) from = s->nchanges - (uint64_t)cap;
    int n = 0;
    for (uint64_t k = from; k < s->nchanges; k++, n++) {
        t[n] = s->ring[k % FG_RING].t;
        mhz[n] = s->ring[k % FG_RING].mhz;
    }
    unlock(s);
    return n;
}

static uint64_t oldest_change(const fg_shared *s)
{
    return s->nchanges > FG_RING ? s->nchanges - FG_RING : 0;
}

/* The clock in effect at instant t (callers hold the lock). */
static int clock_at(const fg_shared *s, double t)
{
    uint64_t lo = oldest_change(s);
    for (uint64_t k = s->nchanges; k-- > lo;)
        if (s->ring[k % FG_RING].t <= t) return s->ring[k % FG_RING].mhz;
    return s->ring[lo % FG_RING].mhz; /* older than what is remembered */
}

/* The first change after instant t, or NULL (callers hold the lock). */
static const fg_change *change_after(const fg_shared *s, double t)
{
    for (uint64_t k = oldest_change(s); k < s->nchanges; k++)
        if (s->ring[k % FG_RING].t > t) return &s->ring[k % FG_RING];
    return NULL;
}

FAKEGPU_API double fakegpu_run_kernel(fakegpu_dev *d, double t_start, const prs_gpu_work *w,
                                      double power_scale, int planned_mhz, double *at_planned_s)
{
    return fakegpu_run_kernel_held(d, -1, t_start, w, power_scale, planned_mhz, at_planned_s);
}

/* Run the limiter's control instants up to x (callers hold the lock), integrating the power up to
 * each and no further. Returns 1 when the clock changed. */
static int lim_run(fakegpu_dev *d, double x)
{
    int changed = 0;
    for (double tk; (tk = lim_next(d->sh)) <= x;)
        changed |= advance(d, tk);
    return changed;
}

/* The kernel's end at model instant end (callers hold the lock, and it is released). */
static void kernel_end(fakegpu_dev *d, double end, int woke_readers)
{
    fg_shared *s = d->sh;
    int woke = 0;
    double p = change_begin(d, end, &woke);
    s->running--;
    s->ifac = noise_factor(s);
    change_end(d, end, p);
    if (note_clock(s, end, effective_mhz(d))) woke = 1;
    unlock_wake(s, woke);
    if (woke_readers) wake_readers(s);
}

FAKEGPU_API double fakegpu_run_kernel_held(fakegpu_dev *d, int slot, double t_start,
                                           const prs_gpu_work *w, double power_scale,
                                           int planned_mhz, double *at_planned_s)
{
    fg_shared *s = d->sh;
    if (slot >= FG_HOLDS) slot = -1;
    lock(s);
    int woke = 0;
    double p = change_begin(d, t_start, &woke);
    lim_start(d, t_start);
    s->running++;
    s->kernels_seen = 1;
    s->kfac = noise_factor(s) * power_scale;
    change_end(d, t_start, p);
    if (note_clock(s, t_start, effective_mhz(d))) woke = 1; /* the power limit holds it back */
    int f = clock_at(s, t_start);
    unlock_wake(s, woke);

    double t = t_start, left = 1.0, at = 0, end;
    int woke_readers = 0;
    for (;;) {
        double dur = prs_gpu_time_s(d->preset, w, f);
        end = t + left * dur;
        lock(s);
        /* The limiter's control instants passed: this thread enters them as it enters its end
         * (with the power known then: a change another stream's late thread enters before one
         * is corrected in the energy, not in the limiter's decision). */
        woke = s->lim_t0 > 0 && lim_run(d, fmin(fakegpu_now_s(), end));
        /* The next change this kernel enters is its end, or a control instant before it:
         * readers may go on up to it. */
        double stop = fmin(end, lim_next(s));
        if (slot >= 0 && s->holds[slot].t != stop) {
            s->holds[slot].t = stop;
            if (hold_moved(s)) woke_readers = 1;
        }
        const fg_change *c = change_after(s, t);
        if (c && c->t <= end) {
            double tc = c->t;
            int fc = c->mhz;
            unlock_wake(s, woke);
            if (woke_readers) wake_readers(s);
            woke_readers = 0;
            if (f == planned_mhz) at += tc - t;
            left -= (tc - t) / dur;
            if (left < 0) left = 0;
            t = tc;
            f = fc;
            continue;
        }
        if (fakegpu_now_s() >= end) {
            /* Decided under the lock: a change made after this has a later instant. */
            if (woke) futex(&s->clock_seq, FUTEX_WAKE, INT_MAX, NULL, 0);
            kernel_end(d, end, woke_readers);
            if (f == planned_mhz) at += end - t;
            break;
        }
        uint32_t seq = atomic_load(&s->clock_seq);
        s->busy_until = stop;
        unlock_wake(s, woke);
        if (woke_readers) wake_readers(s);
        woke_readers = 0;
        struct timespec ts = to_timespec(stop);
        futex(&s->clock_seq, FUTEX_WAIT_BITSET, seq, &ts, FUTEX_BITSET_MATCH_ANY);
    }
    if (at_planned_s) *at_planned_s = planned_mhz > 0 ? at : 0;
    return end;
}
