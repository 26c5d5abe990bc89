/* The fake serving instance's engine (fake_engine.h): a thread that runs vLLM-style iterations
 * in real time on the roofline cost model. Sequences live in one array in arrival order, each
 * waiting or running; the engine owns the array, a handler owns the sequence until it releases
 * it (a released sequence still in the array is marked gone and dropped at the next iteration,
 * so the engine never touches freed memory). */
#define _POSIX_C_SOURCE 200809L
#include "fake_engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLOCK_REREAD_S 0.05 /* the clock file is read at most this often (real seconds) */

struct prs_fake_seq {
    long prompt_tokens, out_tokens, generated;
    int running, done, gone;
    double arrival_s, last_token_s; /* model time */
};

struct prs_fake_engine {
    prs_fake_opts o;
    long kv_tokens;
    pthread_mutex_t mu;
    pthread_cond_t work, token, stop_cv;
    pthread_t thread;
    int stop;
    prs_fake_seq **seqs;
    int nseqs, cap;
    double start_real_s, clock_read_s, last_iter_end_s;
    prs_fake_stats st;
};

static double real_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double model_now_s(const prs_fake_engine *e)
{
    return (real_now_s() - e->start_real_s) * e->o.speedup;
}

static void read_clock(prs_fake_engine *e)
{
    if (e->o.clock_file == NULL || real_now_s() - e->clock_read_s < CLOCK_REREAD_S) return;
    e->clock_read_s = real_now_s();
    FILE *f = fopen(e->o.clock_file, "r");
    if (f == NULL) return;
    int mhz;
    if (fscanf(f, "%d", &mhz) == 1 && mhz > 0) {
        const prs_infer_gpu *g = e->o.model.gpu;
        e->st.mhz = mhz < g->f_min_mhz ? g->f_min_mhz : mhz > g->f_max_mhz ? g->f_max_mhz : mhz;
    }
    fclose(f);
}

/* Drop released sequences; count the others. */
static void sweep(prs_fake_engine *e)
{
    int k = 0;
    e->st.running = e->st.waiting = 0;
    long ctx = 0;
    for (int i = 0; i < e->nseqs; i++) {
        prs_fake_seq *s = e->seqs[i];
        if (s->gone) {
            free(s);
            continue;
        }
        if (s->done) continue; /* finished: its handler still holds it, the engine no longer does */
        e->seqs[k++] = s;
        if (s->running) {
            e->st.running++;
            ctx += s->prompt_tokens + s->generated;
        } else {
            e->st.waiting++;
        }
    }
    e->nseqs = k;
    e->st.kv_usage = e->kv_tokens > 0 ? (double)ctx / (double)e->kv_tokens : 0.0;
}

/* Admit waiting sequences for a prefill; returns how many (marked running), their tokens in
 * *tokens. */
static int admit(prs_fake_engine *e, long *tokens)
{
    long kv = (long)(e->st.kv_usage * (double)e->kv_tokens);
    int n = 0, running = e->st.running;
    *tokens = 0;
    for (int i = 0; i < e->nseqs && running < e->o.max_running; i++) {
        prs_fake_seq *s = e->seqs[i];
        if (s->running) continue;
        long need = s->prompt_tokens + s->out_tokens;
        if (n > 0 &&
            (*tokens + s->prompt_tokens > e->o.max_batched_tokens || kv + need > e->kv_tokens))
            break;
        s->running = 2; /* in this prefill */
        *tokens += s->prompt_tokens;
        kv += need;
        running++;
        n++;
    }
    return n;
}

static void finish_token(prs_fake_engine *e, prs_fake_seq *s, double now_s)
{
    if (s->generated == 0)
        prs__prom_hist_observe(&e->st.ttft, now_s - s->arrival_s);
    else
        prs__prom_hist_observe(&e->st.tpot, now_s - s->last_token_s);
    s->generated++;
    s->last_token_s = now_s;
    e->st.generation_tokens++;
    if (s->generated >= s->out_tokens) {
        s->done = 1;
        e->st.finished++;
        prs__prom_hist_observe(&e->st.e2e, now_s - s->arrival_s);
    }
}

/* Sleep until model time end_s unless stopped; the mutex is held on entry and on return. Past
 * deadlines return at once, so a late wake-up is made up by the next iterations instead of
 * adding to the model's time. */
static void run_until(prs_fake_engine *e, double end_s)
{
    double until = e->start_real_s + end_s / e->o.speedup;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wake = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + (until - real_now_s());
    ts.tv_sec = (time_t)wake;
    ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
    while (!e->stop && real_now_s() < until)
        if (pthread_cond_timedwait(&e->stop_cv, &e->mu, &ts) == ETIMEDOUT) break;
}

/* When the iteration starts, in model time: where the last one ended (the engine went straight
 * on), not the host's clock, so that scheduling delays do not pile up in the model's time; no
 * earlier than the arrival of a prompt it prefills. */
static double iteration_start(const prs_fake_engine *e, int prefill)
{
    double t = e->last_iter_end_s;
    for (int i = 0; prefill && i < e->nseqs; i++)
        if (e->seqs[i]->running == 2 && e->seqs[i]->arrival_s > t) t = e->seqs[i]->arrival_s;
    return t;
}

static void iterate(prs_fake_engine *e)
{
    double t_s, e_j;
    long tokens;
    int n = admit(e, &tokens), tp = e->o.tp, mhz = e->st.mhz;
    int prefill = n > 0;
    if (prefill) {
        prs_infer_roofline_prefill(&e->o.model, tp, mhz, n, (double)tokens / n, &t_s, &e_j);
        e->st.prompt_tokens += (unsigned long)tokens;
    } else {
        long ctx = 0;
        for (int i = 0; i < e->nseqs; i++)
            if (e->seqs[i]->running) ctx += e->seqs[i]->prompt_tokens + e->seqs[i]->generated;
        n = e->st.running;
        if (n == 0) return;
        prs_infer_roofline_decode(&e->o.model, tp, mhz, n, (double)ctx / n, &t_s, &e_j);
    }
    double start = iteration_start(e, prefill), now = start + t_s;
    if (start > e->last_iter_end_s) /* idle until a prompt that came in as the engine went on */
        e->st.energy_j += prs_infer_roofline_idle_w(&e->o.model, tp) * (start - e->last_iter_end_s);
    run_until(e, now);
    e->st.energy_j += e_j;
    for (int i = 0; i < e->nseqs; i++) {
        prs_fake_seq *s = e->seqs[i];
        if (s->gone || !s->running || s->done) continue;
        if (prefill && s->running != 2)
            continue; /* a prefill iteration: only its own prompts gain a token */
        s->running = 1;
        finish_token(e, s, now);
    }
    e->last_iter_end_s = now;
    pthread_cond_broadcast(&e->token);
}

static void *engine_main(void *arg)
{
    prs_fake_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        sweep(e);
        if (e->nseqs == 0) {
            pthread_cond_wait(&e->work, &e->mu);
            double now = model_now_s(e);
            double idle_w = prs_infer_roofline_idle_w(&e->o.model, e->o.tp);
            e->st.energy_j += idle_w * (now - e->last_iter_end_s);
            e->last_iter_end_s = now;
            continue;
        }
        read_clock(e);
        iterate(e);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static int check_opts(const prs_fake_opts *o, long *kv, prs_error *err)
{
    const prs_infer_gpu *g = o->model.gpu;
    if (o->mhz < g->f_min_mhz || o->mhz > g->f_max_mhz)
        return prs_error_set(err, PRS_EINVAL, "--mhz %d is outside %s's %d..%d MHz", o->mhz,
                             g->name, g->f_min_mhz, g->f_max_mhz);
    if (!(o->speedup > 0) || o->speedup > 1e6)
        return prs_error_set(err, PRS_EINVAL, "--speedup must be in (0, 1e6]");
    if (o->max_running < 1 || o->max_batched_tokens < 1 || o->max_waiting < 1)
        return prs_error_set(err, PRS_EINVAL,
                             "--max-running, --max-batched-tokens and --max-waiting must be >= 1");
    return prs_infer_roofline_kv_tokens(&o->model, o->tp, kv, err);
}

int prs__fake_engine_new(const prs_fake_opts *o, prs_fake_engine **out, prs_error *err)
{
    *out = NULL;
    long kv = 0;
    int rc = check_opts(o, &kv, err);
    if (rc) return rc;
    prs_fake_engine *e = calloc(1, sizeof *e);
    if (e == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    e->o = *o;
    e->kv_tokens = kv;
    e->st.mhz = o->mhz;
    e->start_real_s = real_now_s();
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->token, NULL);
    pthread_cond_init(&e->stop_cv, NULL);
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        free(e);
        return prs_error_set(err, PRS_ENOMEM, "cannot start the engine thread");
    }
    *out = e;
    return 0;
}

void prs__fake_engine_free(prs_fake_engine *e)
{
    if (e == NULL) return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_broadcast(&e->work);
    pthread_cond_broadcast(&e->stop_cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    for (int i = 0; i < e->nseqs; i++)
        free(e->seqs[i]);
    free(e->seqs);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->token);
    pthread_cond_destroy(&e->stop_cv);
    free(e);
}

int prs__fake_submit(prs_fake_engine *e, long prompt_tokens, long out_tokens, prs_fake_seq **out,
                     prs_error *err)
{
    *out = NULL;
    prs_fake_seq *s = calloc(1, sizeof *s);
    if (s == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    s->prompt_tokens = prompt_tokens < 1 ? 1 : prompt_tokens;
    s->out_tokens = out_tokens < 1 ? 1 : out_tokens;
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    if (s->prompt_tokens + s->out_tokens > e->kv_tokens) {
        rc = prs_error_set(err, PRS_EINVAL, "prompt and output (%ld tokens) exceed the KV cache",
                           s->prompt_tokens + s->out_tokens);
    } else if (e->st.waiting >= e->o.max_waiting) {
        rc = prs_error_set(err, PRS_ERANGE, "%d requests already wait", e->st.waiting);
    } else if (e->nseqs == e->cap) {
        int cap = e->cap ? e->cap * 2 : 64;
        prs_fake_seq **a = realloc(e->seqs, sizeof(prs_fake_seq *) * (size_t)cap);
        if (a == NULL)
            rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
        else
            e->seqs = a, e->cap = cap;
    }
    if (rc == 0) {
        s->arrival_s = model_now_s(e);
        e->seqs[e->nseqs++] = s;
        e->st.waiting++;
        pthread_cond_signal(&e->work);
        *out = s;
    }
    pthread_mutex_unlock(&e->mu);
    if (rc) free(s);
    return rc;
}

long prs__fake_wait(prs_fake_engine *e, prs_fake_seq *s, long seen, double timeout_s, int *done)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wake = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + timeout_s;
    ts.tv_sec = (time_t)wake;
    ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
    pthread_mutex_lock(&e->mu);
    while (!s->done && s->generated <= seen && !e->stop)
        if (pthread_cond_timedwait(&e->token, &e->mu, &ts) == ETIMEDOUT) break;
    long n = s->generated;
    *done = s->done;
    pthread_mutex_unlock(&e->mu);
    return n;
}

void prs__fake_release(prs_fake_engine *e, prs_fake_seq *s)
{
    if (s == NULL) return;
    pthread_mutex_lock(&e->mu);
    int in_array = 0;
    for (int i = 0; i < e->nseqs; i++)
        if (e->seqs[i] == s) in_array = 1;
    if (in_array)
        s->gone = 1; /* the engine frees it at its next sweep */
    else
        free(s);
    pthread_mutex_unlock(&e->mu);
}

void prs__fake_stats(prs_fake_engine *e, prs_fake_stats *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->st;
    /* an idle engine accounts its idle energy when it wakes: add what accrued so far */
    if (e->nseqs == 0) {
        double idle_w = prs_infer_roofline_idle_w(&e->o.model, e->o.tp);
        out->energy_j += idle_w * (model_now_s(e) - e->last_iter_end_s);
    }
    pthread_mutex_unlock(&e->mu);
}
