/* Energy windows without a job (perseus/monitor.h, docs/monitor.md).
 *
 * Each GPU gets a handle of its own and the client's sampler thread (sampler.h), which reads the
 * energy counter every few milliseconds and queues the changes it sees. The monitor moves them
 * into the GPU's track (monitor_int.h: the counter's values at fitted instants) whenever it is
 * called and from a drain thread of its own every DRAIN_S, so a window left open for hours costs
 * no memory beyond the points its edges need. Windows are an array of open names, each with one
 * begin mark per GPU; end_window puts end marks at its instant and waits, polling every POLL_S,
 * until every mark is resolved or the deadline passes (then the marks are forced, flagged).
 *
 * One mutex guards the tracks and the windows; it is held while points are moved and marks
 * resolved (microseconds), never while a GPU is read (the sampler threads do that). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "monitor_int.h"
#include "perseus/clock.h"
#include "perseus/gpu.h"
#include "perseus/monitor.h"
#include "sampler.h"

#define DRAIN_S 0.1       /* the drain thread's period */
#define POLL_S 0.002      /* end_window and open check the counters this often */
#define WAIT_PERIODS 3    /* end_window waits this many counter intervals, */
#define WAIT_EXTRA_S 0.05 /* plus this, at most PRS_MONITOR_MAX_WAIT_S */

typedef struct mon_gpu {
    prs_gpu *gpu;
    prs__client_sampler *sampler;
    prs__mon_track track;
    int is_sim;
    double sim_last_s; /* sim: the wall instant the simulated GPU has been advanced to */
    char name[128];
} mon_gpu;

typedef struct mon_window {
    char *name;
    int ending;           /* end_window is waiting on it: the name stays taken */
    prs__mon_mark *begin; /* one per GPU */
    prs__mon_mark *end;   /* one per GPU while ending */
} mon_window;

struct prs_monitor {
    int n;
    mon_gpu *gpus;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t drainer;
    int drainer_started, stop;
    mon_window *wins;
    int nwins;
    int failed; /* a track ran out of memory */
};

/* The sampler's hook for a sim GPU: it idles in wall time (blocking power). */
static void sim_advance(void *ud)
{
    mon_gpu *g = ud;
    double now = prs_mono_s();
    if (now > g->sim_last_s) prs_gpu_sim_idle(g->gpu, now - g->sim_last_s);
    g->sim_last_s = now;
}

/* Move every queued sample into the tracks. Lock held. */
static void drain_all(prs_monitor *m)
{
    prs__client_sample buf[256];
    for (int i = 0; i < m->n; i++) {
        mon_gpu *g = &m->gpus[i];
        int got;
        while ((got = prs__client_sampler_drain(g->sampler, buf, 256)) > 0)
            for (int k = 0; k < got; k++)
                if (prs__mon_track_add(&g->track, buf[k].t_lo, buf[k].t_hi, buf[k].value))
                    m->failed = 1;
    }
}

/* Resolve what can be, then forget the points no pending mark needs. Lock held. */
static void settle(prs_monitor *m)
{
    for (int i = 0; i < m->n; i++) {
        prs__mon_track *k = &m->gpus[i].track;
        double keep = INFINITY;
        for (int w = 0; w < m->nwins; w++) {
            prs__mon_mark *marks[2] = {&m->wins[w].begin[i],
                                       m->wins[w].ending ? &m->wins[w].end[i] : NULL};
            for (int e = 0; e < 2; e++)
                if (marks[e] && !prs__mon_track_resolve(k, marks[e], 0) && marks[e]->t_s < keep)
                    keep = marks[e]->t_s;
        }
        prs__mon_track_prune(k, keep);
    }
}

static void *drain_main(void *arg)
{
    prs_monitor *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        drain_all(m);
        settle(m);
        struct timespec ts = prs_mono_timespec(prs_mono_s() + DRAIN_S);
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* Wait (lock held, released while waiting) for POLL_S or a stop. */
static void nap(prs_monitor *m)
{
    struct timespec ts = prs_mono_timespec(prs_mono_s() + POLL_S);
    pthread_cond_timedwait(&m->cv, &m->mu, &ts);
}

static int open_gpu(prs_monitor *m, int i, const char *spec, prs_error *err)
{
    mon_gpu *g = &m->gpus[i];
    prs_error e2 = {0, ""};
    int rc = prs_gpu_open(spec, &g->gpu, &e2);
    if (rc) return prs_error_set(err, rc, "GPU %d (%s): %s", i, spec, e2.msg);
    snprintf(g->name, sizeof g->name, "%s", prs_gpu_name(g->gpu));
    g->is_sim = strcmp(prs_gpu_backend(g->gpu), "sim") == 0;
    g->sim_last_s = prs_mono_s();
    prs__client_sampler_opts o;
    prs__client_sampler_opts_init(&o);
    if (g->is_sim) {
        o.before_read = sim_advance;
        o.before_read_ud = g;
    }
    rc = prs__client_sampler_start(g->gpu, &o, &g->sampler);
    if (rc == PRS_EGPU)
        return prs_error_set(err, rc,
                             "GPU %d (%s): neither its energy counter nor its power can "
                             "be read: %s",
                             i, spec, prs_gpu_errmsg(g->gpu));
    if (rc) return prs_error_set(err, rc, "GPU %d (%s): cannot start its reader", i, spec);
    prs__mon_track_init(&g->track,
                        prs__client_sampler_mode(g->sampler) == PRS__CLIENT_SAMPLE_POWER);
    return 0;
}

/* Wait until every track has two points (a baseline for the first window). */
static int wait_baseline(prs_monitor *m, prs_error *err)
{
    double deadline = prs_mono_s() + PRS_MONITOR_OPEN_WAIT_S;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        drain_all(m);
        int short_of = -1;
        for (int i = 0; i < m->n && short_of < 0; i++)
            if (m->gpus[i].track.n < 2) short_of = i;
        if (short_of < 0 || prs_mono_s() > deadline) {
            pthread_mutex_unlock(&m->mu);
            if (short_of < 0) return 0;
            return prs_error_set(err, PRS_EGPU,
                                 "GPU %d (%s): its energy counter did not move in %g s", short_of,
                                 m->gpus[short_of].name, PRS_MONITOR_OPEN_WAIT_S);
        }
        nap(m);
    }
}

int prs_monitor_open(const char *const *specs, int n, prs_monitor **out, prs_error *err)
{
    if (out) *out = NULL;
    if (!specs || !out || n < 1 || n > PRS_MONITOR_MAX_GPUS)
        return prs_error_set(err, PRS_EINVAL, "prs_monitor_open: 1 to %d GPUs, got %d",
                             PRS_MONITOR_MAX_GPUS, n);
    for (int i = 0; i < n; i++)
        if (!specs[i]) return prs_error_set(err, PRS_EINVAL, "prs_monitor_open: NULL spec");
    prs_monitor *m = calloc(1, sizeof *m);
    if (!m || !(m->gpus = calloc((size_t)n, sizeof *m->gpus)) ||
        prs_sync_init_mono(&m->mu, &m->cv)) {
        if (m) free(m->gpus);
        free(m);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        rc = open_gpu(m, i, specs[i], err);
        m->n = i + 1; /* closed by prs_monitor_close, even half opened */
    }
    if (!rc) rc = wait_baseline(m, err);
    if (!rc && pthread_create(&m->drainer, NULL, drain_main, m))
        rc = prs_error_set(err, PRS_EIO, "cannot start the monitor's thread");
    if (rc) {
        prs_monitor_close(m);
        return rc;
    }
    m->drainer_started = 1;
    *out = m;
    return 0;
}

static void window_free(mon_window *w)
{
    free(w->name);
    free(w->begin);
    free(w->end);
}

void prs_monitor_close(prs_monitor *m)
{
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->drainer_started) pthread_join(m->drainer, NULL);
    for (int i = 0; i < m->n; i++) {
        prs__client_sampler_stop(m->gpus[i].sampler);
        prs_gpu_close(m->gpus[i].gpu);
        prs__mon_track_free(&m->gpus[i].track);
    }
    for (int w = 0; w < m->nwins; w++)
        window_free(&m->wins[w]);
    free(m->wins);
    free(m->gpus);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

int prs_monitor_gpus(const prs_monitor *m)
{
    return m ? m->n : 0;
}

const char *prs_monitor_gpu_name(const prs_monitor *m, int i)
{
    return m && i >= 0 && i < m->n ? m->gpus[i].name : NULL;
}

int prs_monitor_gpu_power_mode(const prs_monitor *m, int i)
{
    return m && i >= 0 && i < m->n ? m->gpus[i].track.power_mode : 0;
}

static int find_window(const prs_monitor *m, const char *name)
{
    for (int w = 0; w < m->nwins; w++)
        if (strcmp(m->wins[w].name, name) == 0) return w;
    return -1;
}

static int check_name(const char *name, prs_error *err)
{
    if (!name || !*name || strlen(name) > PRS_MONITOR_MAX_NAME)
        return prs_error_set(err, PRS_EINVAL, "a window's name is 1 to %d bytes",
                             PRS_MONITOR_MAX_NAME);
    return 0;
}

int prs_monitor_begin_window(prs_monitor *m, const char *name, prs_error *err)
{
    double t = prs_mono_s();
    if (!m) return prs_error_set(err, PRS_EINVAL, "prs_monitor_begin_window: NULL monitor");
    int rc = check_name(name, err);
    if (rc) return rc;
    mon_window w = {0};
    size_t len = strlen(name);
    w.name = malloc(len + 1);
    w.begin = calloc((size_t)m->n, sizeof *w.begin);
    if (!w.name || !w.begin) {
        window_free(&w);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    memcpy(w.name, name, len + 1);
    for (int i = 0; i < m->n; i++)
        w.begin[i].t_s = t;
    pthread_mutex_lock(&m->mu);
    if (find_window(m, name) >= 0)
        rc = prs_error_set(err, PRS_EINVAL, "window '%s' is already open", name);
    else if (m->nwins >= PRS_MONITOR_MAX_WINDOWS)
        rc = prs_error_set(err, PRS_EINVAL, "%d windows are open already", PRS_MONITOR_MAX_WINDOWS);
    if (!rc && m->nwins % 16 == 0) {
        mon_window *v = realloc(m->wins, (size_t)(m->nwins + 16) * sizeof *v);
        if (!v)
            rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
        else
            m->wins = v;
    }
    if (!rc) m->wins[m->nwins++] = w;
    pthread_mutex_unlock(&m->mu);
    if (rc) window_free(&w);
    return rc;
}

/* Take window w out of the array. Lock held. */
static void remove_window(prs_monitor *m, int w)
{
    window_free(&m->wins[w]);
    m->wins[w] = m->wins[--m->nwins];
}

int prs_monitor_cancel_window(prs_monitor *m, const char *name, prs_error *err)
{
    if (!m || !name) return prs_error_set(err, PRS_EINVAL, "prs_monitor_cancel_window: NULL");
    pthread_mutex_lock(&m->mu);
    int w = find_window(m, name), rc = 0;
    if (w < 0 || m->wins[w].ending)
        rc = prs_error_set(err, PRS_EINVAL, "no open window '%s'", name);
    else
        remove_window(m, w);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* How long end_window may wait: a few counter intervals of the slowest GPU. Lock held. */
static double wait_limit(const prs_monitor *m)
{
    double limit = 0;
    for (int i = 0; i < m->n; i++) {
        double p = prs__mon_track_period(&m->gpus[i].track);
        double l = p > 0 ? WAIT_PERIODS * p + WAIT_EXTRA_S : PRS_MONITOR_MAX_WAIT_S;
        if (l > limit) limit = l;
    }
    return limit < PRS_MONITOR_MAX_WAIT_S ? limit : PRS_MONITOR_MAX_WAIT_S;
}

/* Resolve the window's marks, forced when force is set; 1 when all are. Lock held. */
static int resolve_window(prs_monitor *m, mon_window *w, int force)
{
    int all = 1;
    for (int i = 0; i < m->n; i++) {
        const prs__mon_track *k = &m->gpus[i].track;
        all &= prs__mon_track_resolve(k, &w->begin[i], force);
        all &= prs__mon_track_resolve(k, &w->end[i], force);
    }
    return all;
}

static void fill_readings(const prs_monitor *m, const mon_window *w, prs_monitor_reading *out)
{
    for (int i = 0; i < m->n; i++) {
        const prs__mon_mark *b = &w->begin[i], *e = &w->end[i];
        out[i].time_s = e->t_s - b->t_s;
        out[i].energy_j = e->resolved && b->resolved && e->e_j > b->e_j ? e->e_j - b->e_j : 0;
        /* measured: the counter took two values inside the window (one whole interval) */
        out[i].estimate = !b->resolved || !e->resolved || b->estimate || e->estimate ||
                          e->after_seq - b->after_seq < 2;
    }
}

int prs_monitor_end_window(prs_monitor *m, const char *name, prs_monitor_reading *out, int cap,
                           prs_error *err)
{
    double t = prs_mono_s();
    if (!m || !name || !out) return prs_error_set(err, PRS_EINVAL, "prs_monitor_end_window: NULL");
    if (cap < m->n)
        return prs_error_set(err, PRS_EINVAL, "room for %d readings, the monitor has %d GPUs", cap,
                             m->n);
    prs__mon_mark *end = calloc((size_t)m->n, sizeof *end);
    if (!end) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (int i = 0; i < m->n; i++)
        end[i].t_s = t;
    pthread_mutex_lock(&m->mu);
    int w = find_window(m, name);
    if (w < 0 || m->wins[w].ending) {
        pthread_mutex_unlock(&m->mu);
        free(end);
        return prs_error_set(err, PRS_EINVAL, "no open window '%s'", name);
    }
    m->wins[w].ending = 1;
    m->wins[w].end = end;
    double deadline = t + wait_limit(m);
    for (;;) {
        drain_all(m);
        w = find_window(m, name); /* others may have moved it */
        int now_past = prs_mono_s() > deadline;
        if (resolve_window(m, &m->wins[w], now_past) || now_past) break;
        nap(m);
    }
    w = find_window(m, name);
    fill_readings(m, &m->wins[w], out);
    int failed = m->failed;
    remove_window(m, w);
    pthread_mutex_unlock(&m->mu);
    if (failed) return prs_error_set(err, PRS_ENOMEM, "out of memory keeping the readings");
    return 0;
}
