/* The planner's points on their way out (emit.h). Picking a hull plan costs several passes over
 * the schedule graph per point, far more than the planner's own step, and each point's pick
 * depends only on that point's relaxed plan; so the submitting thread (the planner) copies
 * each point into a ring of slots and goes on, and worker threads pick the plans.
 *
 * Points are grouped into jobs of EMIT_JOB_MIN to EMIT_JOB_POINTS points, a job ending where the
 * relaxed plan's clocks change when it can (the picks of a point whose clocks did not change
 * reuse the results that depend on the clocks alone). A job runs on one thread, in order; its
 * first point is picked from scratch, so every pick is what a single thread would compute, and
 * the output does not depend on the number of threads. Jobs are taken oldest first and delivered
 * in order by the submitting thread, which picks jobs itself while the ring is full. The ring's
 * size is bounded in bytes (PRS__EMIT_BYTES by default).
 *
 * With one thread (or when no worker could be started) nothing is copied: each point is picked
 * from the caller's arrays when it is submitted and delivered at once, as a planner without
 * threads would. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emit.h"

/* Points per job: at least (unless the ring is small) and at most. */
#define EMIT_JOB_MIN 8
#define EMIT_JOB_POINTS 32

/* A point in flight. Its inputs: when it starts a job, every op's relaxed duration and clock
 * (table entry); else the nch ops that changed since the point before, ch_op[k] now at dur[k]
 * and idx[k]. Its plan: out, and (after a job's first point) the ops whose clock differs from
 * the point before's, chg_op[k] now at chg_freq[k] MHz. */
typedef struct slot {
    long *dur;
    int *idx, *ch_op, nch;
    int changed; /* some clock differs from the point before's */
    long planned;
    double delta;
    prs__pick_out out;
    int *chg_op, *chg_freq, nchg;
} slot;

typedef struct job {
    long first; /* its first point (submission number) */
    int n;      /* points */
    int done;
} job;

struct prs__emit {
    int nops;
    const int *freq; /* per table entry: its clock (MHz) */
    prs__emit_deliver deliver;
    void *ud;
    slot *slots;
    long nslots;
    int job_min, job_points;
    job *jobs;                         /* a ring of nslots: every job holds a slot */
    long job_head, job_next, job_tail; /* first undelivered, first not taken, next to close */
    long open_first;                   /* the job being filled: its first point */
    int open_n;                        /* its points (0: none) */
    long submitted, delivered;         /* points */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    atomic_int stop;        /* the workers are to stop (read between points too) */
    int joined;             /* they have */
    int err;                /* the first deliver callback's failure: returned from then on */
    int nth;                /* worker threads started */
    struct worker *workers; /* nth of them */
    struct worker *own;     /* the submitting thread's context */
};

/* A thread's context: its picker, and the inputs of the job's point in hand. */
struct worker {
    prs__emit *e;
    prs__pick_ctx *c;
    long *dur;
    int *idx;
    pthread_t th;
};

int prs__emit_default_threads(void)
{
    long n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > PRS_PLAN_AUTO_THREADS ? PRS_PLAN_AUTO_THREADS : (int)n;
}

/* Slot s's inputs into w's arrays: all of them (first of a job), or its changes. */
static void load_inputs(prs__emit *e, struct worker *w, const slot *s, int first)
{
    if (first) {
        memcpy(w->dur, s->dur, sizeof *w->dur * (size_t)e->nops);
        memcpy(w->idx, s->idx, sizeof *w->idx * (size_t)e->nops);
        return;
    }
    for (int k = 0; k < s->nch; k++) {
        w->dur[s->ch_op[k]] = s->dur[k];
        w->idx[s->ch_op[k]] = s->idx[k];
    }
}

/* The clocks of s's plan that differ from those of prev's (the point before it). */
static void plan_changes(prs__emit *e, slot *s, const slot *prev)
{
    s->nchg = 0;
    for (int op = 0; op < e->nops; op++)
        if (s->out.best[op] != prev->out.best[op]) {
            s->chg_op[s->nchg] = op;
            s->chg_freq[s->nchg++] = e->freq[s->out.best[op]];
        }
}

/* Pick every point of job j with w's context (or those before a stop: its points are then
 * never delivered). */
static void run_job(prs__emit *e, struct worker *w, const job *j)
{
    for (int i = 0; i < j->n && !atomic_load(&e->stop); i++) {
        slot *s = &e->slots[(j->first + i) % e->nslots];
        load_inputs(e, w, s, i == 0);
        prs__pick_point(w->c, w->idx, i == 0 || s->changed, w->dur, s->planned, &s->out);
        if (i > 0) plan_changes(e, s, &e->slots[(j->first + i - 1) % e->nslots]);
    }
}

/* With e->mu held: take the oldest job not taken, run it with w (the lock released meanwhile)
 * and mark it done. 0 when there was none. */
static int take_one(prs__emit *e, struct worker *w)
{
    if (e->job_next == e->job_tail) return 0;
    job *j = &e->jobs[e->job_next++ % e->nslots];
    pthread_mutex_unlock(&e->mu);
    run_job(e, w, j);
    pthread_mutex_lock(&e->mu);
    j->done = 1;
    pthread_cond_broadcast(&e->done);
    return 1;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    prs__emit *e = w->e;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && e->job_next == e->job_tail)
            pthread_cond_wait(&e->work, &e->mu);
        if (e->stop) break;
        take_one(e, w);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void free_slots(prs__emit *e)
{
    for (long i = 0; e->slots && i < e->nslots; i++) {
        slot *s = &e->slots[i];
        free(s->dur);
        free(s->idx);
        free(s->ch_op);
        free(s->chg_op);
        free(s->chg_freq);
        free(s->out.best);
        for (int m = 0; m < PRS__TRACK_MODES; m++)
            free(s->out.x_idx[m]);
    }
    free(e->slots);
    free(e->jobs);
    e->slots = NULL;
    e->jobs = NULL;
}

/* The slots' buffers (out->best and out->x_idx only in hull mode); 0 when out of memory. */
static int alloc_slots(prs__emit *e, const prs__pick_shared *sh)
{
    size_t ops = (size_t)e->nops;
    e->slots = calloc((size_t)e->nslots, sizeof *e->slots);
    e->jobs = calloc((size_t)e->nslots, sizeof *e->jobs);
    if (!e->slots || !e->jobs) return 0;
    for (long i = 0; i < e->nslots; i++) {
        slot *s = &e->slots[i];
        s->dur = malloc(ops * sizeof *s->dur);
        s->idx = malloc(ops * sizeof *s->idx);
        s->ch_op = malloc(ops * sizeof *s->ch_op);
        s->chg_op = malloc(ops * sizeof *s->chg_op);
        s->chg_freq = malloc(ops * sizeof *s->chg_freq);
        s->out.best = malloc(ops * sizeof *s->out.best);
        if (!s->dur || !s->idx || !s->ch_op || !s->chg_op || !s->chg_freq || !s->out.best) return 0;
        for (int m = 0; m < PRS__TRACK_MODES && sh->hull && sh->tracks; m++)
            if (!(s->out.x_idx[m] = malloc(ops * sizeof(int)))) return 0;
    }
    return 1;
}

/* Slots: what max_bytes holds, at most 4 jobs per thread (one thread uses slot 0's out alone),
 * at least 2 (a job then holds at most half of them, so a full ring always holds a closed
 * job). */
static void size_ring(prs__emit *e, const prs__pick_shared *sh, int threads, long max_bytes)
{
    /* bytes per slot in double: no overflow for any op count */
    double per = (double)e->nops * (double)(sizeof(long) + 5 * sizeof(int));
    if (sh->hull && sh->tracks) per += (double)e->nops * (double)(PRS__TRACK_MODES * sizeof(int));
    double fit = (double)(max_bytes > 0 ? max_bytes : PRS__EMIT_BYTES) / (per > 0 ? per : 1);
    long want = threads > 1 ? 4L * EMIT_JOB_POINTS * threads : 2; /* 1: slot 0's out only */
    e->nslots = fit < (double)want ? (long)fit : want;
    if (e->nslots < 2) e->nslots = 2;
    e->job_points = (int)(e->nslots / 2 < EMIT_JOB_POINTS ? e->nslots / 2 : EMIT_JOB_POINTS);
    e->job_min = e->job_points < EMIT_JOB_MIN ? e->job_points : EMIT_JOB_MIN;
}

/* w's picker and input arrays; 0 when out of memory. */
static int init_worker(prs__emit *e, struct worker *w, const prs__pick_shared *sh)
{
    w->e = e;
    w->c = prs__pick_new(sh);
    w->dur = malloc(sizeof *w->dur * (size_t)e->nops);
    w->idx = malloc(sizeof *w->idx * (size_t)e->nops);
    return w->c && w->dur && w->idx;
}

static void free_worker(struct worker *w)
{
    prs__pick_free(w->c);
    free(w->dur);
    free(w->idx);
    memset(w, 0, sizeof *w);
}

prs__emit *prs__emit_new(const prs__pick_shared *sh, int threads, long max_bytes,
                         prs__emit_deliver deliver, void *ud)
{
    prs__emit *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->nops = sh->g->nops;
    e->freq = sh->table->freq;
    e->deliver = deliver;
    e->ud = ud;
    if (threads < 1) threads = 1;
    size_ring(e, sh, threads, max_bytes);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->done, NULL);
    e->workers = calloc((size_t)threads, sizeof *e->workers);
    e->own = e->workers;
    int ok = e->workers && alloc_slots(e, sh);
    if (!ok && e->workers && threads > 1) { /* no room to share the work: pick alone */
        free_slots(e);
        size_ring(e, sh, threads = 1, max_bytes);
        ok = alloc_slots(e, sh);
    }
    if (!ok || !init_worker(e, e->own, sh)) {
        prs__emit_free(e);
        return NULL;
    }
    while (e->nth < threads - 1) {
        struct worker *w = &e->workers[e->nth + 1];
        if (!init_worker(e, w, sh) || pthread_create(&w->th, NULL, worker_main, w)) {
            free_worker(w);
            break;
        }
        e->nth++;
    }
    if (e->nth == 0 && e->nslots > 2) { /* no worker started: slot 0 is all that is used */
        free_slots(e);
        size_ring(e, sh, 1, max_bytes);
        if (!alloc_slots(e, sh)) {
            prs__emit_free(e);
            return NULL;
        }
    }
    return e;
}

void prs__emit_stop(prs__emit *e)
{
    if (e->joined) return;
    pthread_mutex_lock(&e->mu);
    atomic_store(&e->stop, 1);
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->mu);
    for (int i = 1; i <= e->nth; i++)
        pthread_join(e->workers[i].th, NULL);
    e->joined = 1;
}

void prs__emit_free(prs__emit *e)
{
    if (!e) return;
    if (e->workers) prs__emit_stop(e);
    for (int i = 1; e->workers && i <= e->nth; i++)
        free_worker(&e->workers[i]);
    if (e->own) free_worker(e->own);
    free_slots(e);
    free(e->workers);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->done);
    free(e);
}

/* Deliver the done jobs at the head, in order. 0, or the deliver callback's code. */
static int deliver_done(prs__emit *e)
{
    for (;;) {
        pthread_mutex_lock(&e->mu);
        int ready = e->job_head != e->job_tail && e->jobs[e->job_head % e->nslots].done;
        job j = e->jobs[e->job_head % e->nslots];
        pthread_mutex_unlock(&e->mu);
        if (!ready) return 0;
        for (int i = 0; i < j.n; i++) {
            const slot *s = &e->slots[(j.first + i) % e->nslots];
            prs__emit_point p = {s->planned, s->delta, &s->out, NULL, NULL, 0};
            if (i > 0) p.chg_op = s->chg_op, p.chg_freq = s->chg_freq, p.nchg = s->nchg;
            int rc = e->deliver(e->ud, &p);
            if (rc) return e->err = rc;
        }
        pthread_mutex_lock(&e->mu);
        e->job_head++;
        e->delivered = j.first + j.n;
        pthread_mutex_unlock(&e->mu);
    }
}

/* Close the job being filled: it can be taken from now on. */
static void close_job(prs__emit *e)
{
    pthread_mutex_lock(&e->mu);
    job *j = &e->jobs[e->job_tail % e->nslots];
    j->first = e->open_first;
    j->n = e->open_n;
    j->done = 0;
    e->job_tail++;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
    e->open_n = 0;
}

/* Deliver what is done; then, while more than `keep` points are undelivered (or, keep < 0,
 * while any closed job is), run a job not taken yet or wait for one to be done. */
static int drain(prs__emit *e, long keep)
{
    for (;;) {
        int rc = deliver_done(e);
        if (rc) return rc;
        pthread_mutex_lock(&e->mu);
        int more = keep < 0 ? e->job_head != e->job_tail : e->submitted - e->delivered > keep;
        if (more && !take_one(e, e->own) && !e->jobs[e->job_head % e->nslots].done)
            pthread_cond_wait(&e->done, &e->mu);
        pthread_mutex_unlock(&e->mu);
        if (!more) return 0;
    }
}

/* No worker threads: pick the point from the caller's arrays and deliver it. */
static int pick_now(prs__emit *e, const int *idx, int changed, const long *dur, long planned,
                    double delta)
{
    slot *s = &e->slots[0];
    prs__pick_point(e->own->c, idx, changed || e->submitted == 0, dur, planned, &s->out);
    e->submitted++;
    prs__emit_point p = {planned, delta, &s->out, NULL, NULL, 0};
    int rc = e->deliver(e->ud, &p);
    if (!rc) e->delivered++;
    return e->err = rc;
}

/* Why no more points are taken: the failed delivery's code, PRS_ECANCELED after a stop, or 0. */
static int halted(const prs__emit *e)
{
    return e->err ? e->err : e->joined ? PRS_ECANCELED : 0;
}

int prs__emit_submit(prs__emit *e, const int *idx, int changed, const long *dur, int nch,
                     const int *ch_op, long planned, double delta)
{
    int h = halted(e);
    if (h) return h;
    if (e->nth == 0) return pick_now(e, idx, changed, dur, planned, delta);
    if (e->open_n >= e->job_points || (changed && e->open_n >= e->job_min) ||
        (e->open_n > 0 && !ch_op))
        close_job(e);
    int rc = drain(e, e->nslots - 1); /* room for one more point */
    if (rc) return rc;
    slot *s = &e->slots[e->submitted % e->nslots];
    s->changed = changed;
    if (e->open_n == 0 || !ch_op) { /* a job starts from a copy of everything (!ch_op: closed
                                     * the open job above) */
        e->open_first = e->submitted;
        memcpy(s->idx, idx, sizeof *idx * (size_t)e->nops);
        memcpy(s->dur, dur, sizeof *dur * (size_t)e->nops);
    } else {
        s->nch = nch;
        for (int k = 0; k < nch; k++) {
            s->ch_op[k] = ch_op[k];
            s->dur[k] = dur[ch_op[k]];
            s->idx[k] = idx[ch_op[k]];
        }
    }
    s->planned = planned;
    s->delta = delta;
    e->open_n++;
    pthread_mutex_lock(&e->mu);
    e->submitted++;
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int prs__emit_flush(prs__emit *e)
{
    int h = halted(e);
    if (h) return h;
    if (e->open_n > 0) close_job(e);
    return drain(e, -1);
}

void prs__emit_count(const prs__emit *e, prs_plan_stats *st)
{
    for (int i = 0; e->workers && i <= e->nth; i++)
        if (e->workers[i].c) prs__pick_count(e->workers[i].c, st);
}
