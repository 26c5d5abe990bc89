/* The client's hooks and profiler (perseus/client.h), run on the training thread.
 *
 * Every computation is a window: begin syncs the device, sets the clock planned for this position
 * of the iteration and reads the backend's time and energy counter; end syncs again and reads
 * them again. A window is tagged with the clock requested for it, which is the clock in effect
 * (the controller applies it before the computation is launched; a clock the GPU refused is
 * counted in clock_failures and the server groups windows by the tag, docs/server.md). The
 * iteration's time and energy run from one iteration_end to the next, so waits between
 * computations (pipeline bubbles, communication, the optimizer) are in the iteration but not in
 * any window.
 *
 * The hooks never touch the network. The schedule the background thread fetched is published
 * with a version number; the training thread compares it with an atomic load at each iteration
 * boundary and copies the schedule only when it changed, so every iteration runs one schedule
 * (the profiling windows of an iteration all belong to one round). Ended iterations go into a
 * fixed-size ring under one mutex; when the ring is full the new iteration is dropped, which
 * keeps what the background thread is posting valid without copying it.
 *
 * Warm-up: the first warmup_iterations of the process (CUDA context, allocator, kernel caches)
 * are not reported at all; the server also drops the first iterations of every profiling round
 * (docs/api.md), which covers the clock change between rounds. In a profiling round the client
 * reports only the warm-up + measured iterations the schedule asks for; the iterations it runs
 * while the other ranks finish the round are not sent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

void prs_client_opts_init(prs_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gpu_spec = "nvml";
    o->controller = -1;
    o->poll_interval_s = 0.5;
    o->http_timeout_s = 5;
    o->flush_timeout_s = 2;
    o->warmup_iterations = 1;
    o->max_queue = 4096;
}

static int copy_str(char *dst, size_t n, const char *src, const char *what, prs_error *err)
{
    if (!src) {
        dst[0] = '\0';
        return 0;
    }
    if (strlen(src) >= n) return prs_error_set(err, PRS_EINVAL, "%s is too long", what);
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

static void client_destroy(prs_client *c)
{
    if (c->ctl) prs_clockctl_free(c->ctl);
    if (c->own_gpu) prs_gpu_close(c->gpu);
    for (int i = 0; c->queue && i < c->q_len; i++)
        clientI_iteration_free(&c->queue[(c->q_head + i) % c->opts.max_queue]);
    free(c->queue);
    free(c->wins);
    clientI_schedule_free(&c->cur);
    clientI_schedule_free(&c->latest);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

int prs_client_new(const prs_client_opts *o, prs_client **out, prs_error *err)
{
    *out = NULL;
    if (!o || !o->server_url || !*o->server_url)
        return prs_error_set(err, PRS_EINVAL, "client: server_url is required");
    if (!o->job_spec_json && (!o->job_id || !o->token))
        return prs_error_set(err, PRS_EINVAL, "client: give job_id and token, or job_spec_json");
    if (o->rank < 0 || o->dp < 0 || o->pp < 0 || o->tp < 0)
        return prs_error_set(err, PRS_EINVAL, "client: rank and coordinates must be >= 0");
    if (!(o->poll_interval_s > 0) || !(o->http_timeout_s > 0) || !(o->flush_timeout_s >= 0) ||
        o->warmup_iterations < 0 || o->max_queue < 1 || o->controller < -1 || o->controller > 1)
        return prs_error_set(err, PRS_EINVAL, "client: bad option value");
    clientI_global_init();
    prs_client *c = calloc(1, sizeof *c);
    if (!c) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->opts = *o;
    int rc = copy_str(c->url, sizeof c->url, o->server_url, "server_url", err);
    if (!rc) rc = copy_str(c->job_id, sizeof c->job_id, o->job_id, "job_id", err);
    if (!rc) rc = copy_str(c->token, sizeof c->token, o->token, "token", err);
    size_t ul = strlen(c->url);
    while (ul > 0 && c->url[ul - 1] == '/')
        c->url[--ul] = '\0';
    c->opts.server_url = c->url;
    c->opts.job_id = c->job_id;
    c->opts.token = c->token;
    c->opts.job_spec_json = NULL;
    c->cur.plan_id = c->latest.plan_id = -1;
    c->stats.plan_id = -1;
    c->queue = rc ? NULL : calloc((size_t)o->max_queue, sizeof *c->queue);
    if (!rc && !c->queue) rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
    if (!rc && !o->job_id) {
        c->opts.job_spec_json = o->job_spec_json;
        rc = clientI_create_job(c, err);
        c->opts.job_spec_json = NULL;
    }
    if (!rc) {
        if (o->gpu) {
            c->gpu = o->gpu;
        } else {
            rc = prs_gpu_open(o->gpu_spec ? o->gpu_spec : "nvml", &c->gpu, err);
            c->own_gpu = rc == 0;
        }
    }
    if (!rc) {
        int n = 0, top = 0;
        if (prs_gpu_clocks(c->gpu, &top, 1, &n) == 0 && n > 0) c->f_max_mhz = top;
        int mode = o->controller;
        if (mode < 0)
            mode = strcmp(prs_gpu_backend(c->gpu), "sim") == 0 ? PRS_CLOCKCTL_INLINE
                                                               : PRS_CLOCKCTL_PROCESS;
        /* Fork the watchdog before the background thread exists. */
        rc = prs_clockctl_new(c->gpu, (prs_clockctl_mode)mode, &c->ctl, err);
    }
    if (!rc) {
        if (pthread_create(&c->thread, NULL, clientI_thread_main, c) != 0)
            rc = prs_error_set(err, PRS_ENOMEM, "client: cannot start its thread");
        else
            c->thread_started = 1;
    }
    if (rc) {
        client_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

void prs_client_free(prs_client *c)
{
    if (!c) return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    client_destroy(c); /* frees the controller: the clocks are reset */
}

const char *prs_client_job_id(const prs_client *c)
{
    return c->job_id;
}

const char *prs_client_token(const prs_client *c)
{
    return c->token;
}

void prs_client_get_stats(prs_client *c, prs_client_stats *s)
{
    pthread_mutex_lock(&c->mu);
    *s = c->stats;
    pthread_mutex_unlock(&c->mu);
    s->clock_failures = atomic_load_explicit(&c->clock_failures, memory_order_relaxed);
    s->clock_mhz = atomic_load_explicit(&c->clock_mhz, memory_order_relaxed);
}

static int phase_is(const clientI_schedule *s, const char *p)
{
    return strcmp(s->phase, p) == 0;
}

static void set_clock(prs_client *c, int mhz)
{
    if (prs_clockctl_set(c->ctl, mhz) != 0)
        atomic_fetch_add_explicit(&c->clock_failures, 1, memory_order_relaxed);
    atomic_store_explicit(&c->clock_mhz, mhz, memory_order_relaxed);
}

/* Adopt the newest schedule when it changed (an atomic load otherwise). */
static void adopt_schedule(prs_client *c)
{
    if (atomic_load_explicit(&c->latest_version, memory_order_acquire) == c->cur_version) return;
    pthread_mutex_lock(&c->mu);
    c->cur_version = atomic_load_explicit(&c->latest_version, memory_order_relaxed);
    int *clocks = c->latest.n ? malloc(sizeof(int) * (size_t)c->latest.n) : NULL;
    if (c->latest.n && !clocks) { /* keep the old schedule; try again next iteration */
        c->cur_version--;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (clocks) memcpy(clocks, c->latest.clocks, sizeof(int) * (size_t)c->latest.n);
    if (strcmp(c->cur.phase, c->latest.phase) != 0 || c->cur.round != c->latest.round)
        c->round_reported = 0;
    free(c->cur.clocks);
    c->cur = c->latest;
    c->cur.clocks = clocks;
    memcpy(c->stats.phase, c->cur.phase, sizeof c->stats.phase);
    c->stats.round = c->cur.round;
    c->stats.plan_id = c->cur.plan_id;
    pthread_mutex_unlock(&c->mu);
    if (phase_is(&c->cur, "done") || phase_is(&c->cur, "failed")) set_clock(c, 0);
}

static void device_sync(prs_client *c)
{
    if (c->opts.device_sync) c->opts.device_sync(c->opts.sync_user);
}

static void start_iteration(prs_client *c)
{
    adopt_schedule(c);
    c->iter_t0 = prs_gpu_now_s(c->gpu);
    c->iter_e0 = prs_gpu_read_energy_j(c->gpu);
    c->iter_started = 1;
}

int prs_client_begin(prs_client *c, prs_instr instr, int microbatch)
{
    if (!c->iter_started) {
        device_sync(c);
        start_iteration(c);
    } else {
        device_sync(c);
    }
    if (c->cur.n > 0) {
        int f = c->cur.clocks[c->op < c->cur.n ? c->op : c->cur.n - 1];
        if (f != prs_clockctl_requested(c->ctl)) set_clock(c, f);
    }
    c->win_clock = prs_clockctl_requested(c->ctl);
    if (c->win_clock <= 0) c->win_clock = c->f_max_mhz;
    c->in_window = 1;
    c->win_t0 = prs_gpu_now_s(c->gpu);
    c->win_e0 = prs_gpu_read_energy_j(c->gpu);
    return 0;
}

int prs_client_end(prs_client *c, prs_instr instr, int microbatch)
{
    if (!c->in_window) return PRS_EINVAL;
    device_sync(c);
    double t = prs_gpu_now_s(c->gpu) - c->win_t0;
    double e = prs_gpu_read_energy_j(c->gpu) - c->win_e0;
    c->in_window = 0;
    c->op++;
    if (c->n_wins == c->cap_wins) {
        int cap = c->cap_wins ? 2 * c->cap_wins : 64;
        clientI_window *w = realloc(c->wins, sizeof *w * (size_t)cap);
        if (!w) return PRS_ENOMEM;
        c->wins = w;
        c->cap_wins = cap;
    }
    clientI_window *w = &c->wins[c->n_wins++];
    w->instr = instr;
    w->microbatch = microbatch;
    w->clock_mhz = c->win_clock;
    w->time_s = t;
    w->energy_j = e;
    return 0;
}

int prs_client_iteration_end(prs_client *c)
{
    if (!c->iter_started) return 0;
    device_sync(c);
    double now = prs_gpu_now_s(c->gpu), energy = prs_gpu_read_energy_j(c->gpu);
    clientI_iteration it;
    memset(&it, 0, sizeof it);
    it.iteration = c->iter_no;
    it.round = c->cur.round;
    it.time_s = now - c->iter_t0;
    it.energy_j = energy - c->iter_e0;
    it.clock_mhz = c->n_wins ? c->wins[0].clock_mhz : c->f_max_mhz;
    int report = c->iter_no >= c->opts.warmup_iterations && it.time_s > 0 &&
                 isfinite(it.energy_j) &&
                 (phase_is(&c->cur, "profiling") || phase_is(&c->cur, "planning") ||
                  phase_is(&c->cur, "running"));
    /* A profiling round needs warm-up + measured iterations from each rank; more would only
     * load the server while the other ranks finish the round. */
    if (report && phase_is(&c->cur, "profiling") && c->cur.quota > 0 &&
        c->round_reported >= c->cur.quota)
        report = 0;
    if (report) c->round_reported++;
    int keep_windows = report && phase_is(&c->cur, "profiling") && c->n_wins > 0;
    if (keep_windows) {
        it.windows = malloc(sizeof *it.windows * (size_t)c->n_wins);
        if (it.windows) {
            memcpy(it.windows, c->wins, sizeof *it.windows * (size_t)c->n_wins);
            it.n_windows = c->n_wins;
        }
    }
    pthread_mutex_lock(&c->mu);
    c->stats.iterations++;
    if (report) {
        if (c->q_len < c->opts.max_queue) {
            c->queue[(c->q_head + c->q_len) % c->opts.max_queue] = it;
            c->q_len++;
            it.windows = NULL;
        } else {
            c->stats.dropped++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(it.windows);
    c->iter_no++;
    c->op = 0;
    c->n_wins = 0;
    c->in_window = 0;
    c->iter_t0 = now;
    c->iter_e0 = energy;
    adopt_schedule(c);
    return 0;
}
