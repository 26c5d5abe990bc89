/* The planner task queue: at most --max-planners planner threads run at once; further
 * plannings wait in s->tasks (started = 0) and start, oldest first, as running ones finish. A
 * planner runs outside every lock on a copy of the job's profile, and takes the locks only to
 * report progress and to install its result. It is stopped through its progress callback,
 * which the core calls after every step: when the job is completed or deleted, when the server
 * shuts down (cancel), or past the planning time limit (timed_out). Locks: task_mu for the
 * tasks; the table lock to read a task's job pointer, which a deletion clears
 * (planq_detach_locked). */
#include "perseus/clock.h"
#include "perseus/noise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_int.h"
#include "prs_assert.h"

typedef struct plan_task {
    struct prs_server *s;
    job *j; /* NULL once the job was deleted: the result is dropped (lock held to read it) */
    char job_id[SECURE_ID_LEN + 1];
    prs_cost_model cost_model;
    prs_profile *profile; /* a copy: the job's may be replaced while we plan */
    prs_pipeline pipe;    /* job_pipeline when planning started */
    int robust;           /* plan with prs_plan_robust: the profile was measured here */
    pthread_t thread;
    int started;   /* its thread runs (else it waits for a planner slot) */
    int finished;  /* done (or dropped before it started): reap it */
    int cancel;    /* CANCEL_*: read by the planner thread without the lock (atomics) */
    int timed_out; /* the planner passed the time limit (planner thread only) */
    double deadline;
    double progress_at; /* last progress update taken */
    long calls;         /* progress calls (planner thread only; logged when canceled) */
    int walking;        /* the planner's walk began: a call with total > 0 (planner thread) */
    double peak_bytes;  /* the planner's memory estimate, held from s->plan_mem while it runs */
    int holds_mem;      /* peak_bytes counted in s->plan_mem (task_mu) */
    struct plan_task *next;
} plan_task;

enum { CANCEL_NONE = 0, CANCEL_JOB_LEFT = 1, CANCEL_SHUTDOWN = 2 };

/* Progress from the planner: whether to stop (cancel set, or the time limit passed). Progress
 * is taken at most every 50 ms (each update takes the job's lock exclusively). */
static int on_plan_progress(void *ud, long done, long total)
{
    plan_task *t = ud;
    t->calls++;
    if (total > 0) t->walking = 1;
    if (__atomic_load_n(&t->cancel, __ATOMIC_ACQUIRE)) return 1;
    double now = prs_mono_s();
    if (now > t->deadline) {
        t->timed_out = 1;
        return 1;
    }
    if (total == 0) return 0; /* setting up: nothing to report yet */
    if (done < total && now - t->progress_at < 0.05) return 0;
    t->progress_at = now;
    pthread_rwlock_rdlock(&t->s->lock);
    job *j = t->j; /* cleared only under the table lock held exclusively */
    if (j) __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&t->s->lock);
    if (j) {
        pthread_rwlock_wrlock(j->lock);
        j->plan_done = done;
        j->plan_total = total;
        pthread_rwlock_unlock(j->lock);
        table_unpin(j);
    }
    return 0;
}

/* Progress of a check made before any planner runs: stop when the server stops. */
static int on_check_progress(void *ud, long done, long total)
{
    const prs_server *s = ud;
    (void)done;
    (void)total;
    return __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE);
}

void planq_opts(const prs_server *s, const prs_pipeline *pipe, prs_cost_model model,
                prs_plan_opts *o)
{
    prs_plan_opts_default(o);
    o->pipe = *pipe;
    o->cost_model = model;
    o->frontier = PRS_FRONTIER_CLEAN; /* the plans served: none beaten by a faster one */
    o->max_points = s->cfg.max_plan_points;
    o->progress = on_check_progress;
    o->ud = (void *)s;
}

/* Hull: the most picking threads, up to o->threads (0: one per processor), whose estimate fits
 * the budget, at least 1, into o->threads; *peak: the estimate with them. */
static void fit_threads(const prs_server *s, prs_plan_opts *o, const prs_plan_measures *m,
                        double *peak)
{
    if (o->cost_model == PRS_COST_HULL && !o->threads) {
        /* the planner's default made explicit: one per processor, at most the auto limit */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n < 1 ? 1 : n > PRS_PLAN_AUTO_THREADS ? PRS_PLAN_AUTO_THREADS : (int)n;
    }
    *peak = prs_plan_peak_bytes(o, m);
    while (*peak > (double)s->cfg.max_plan_memory && o->threads > 1) {
        o->threads--;
        *peak = prs_plan_peak_bytes(o, m);
    }
}

int planq_check_plannable(const prs_server *s, const prs_profile *p, prs_plan_opts *o, double *peak,
                          const char **code, char *why, size_t n)
{
    prs_plan_measures m;
    prs_error err = {0, ""};
    *code = "bad_profile";
    *peak = 0;
    int rc = prs_plan_measure(p, o, "unit_time_s", &m, &err);
    if (rc) {
        if (rc == PRS_ECANCELED) *code = "canceled";
        snprintf(why, n, "%s", err.msg);
        return -1;
    }
    *code = "too_large_to_plan";
    fit_threads(s, o, &m, peak);
    if (*peak > (double)s->cfg.max_plan_memory) {
        snprintf(why, n,
                 "planning would need about %.1f MiB (%ld computations in the schedule graph, "
                 "%.1f MiB of tables at a unit time of %g s), over the server's limit of %.1f MiB "
                 "(--max-plan-memory): use a larger unit_time_s, fewer microbatches or a larger "
                 "limit",
                 *peak / 1048576.0, m.ops, m.table_bytes / 1048576.0, o->pipe.unit_time_s,
                 (double)s->cfg.max_plan_memory / 1048576.0);
        return -1;
    }
    if (m.span > s->cfg.max_plan_points) {
        snprintf(why, n,
                 "the frontier could have %ld points at a unit time of %g s, over the server's "
                 "limit of %ld (--max-plan-points): use a larger unit_time_s",
                 m.span, o->pipe.unit_time_s, s->cfg.max_plan_points);
        return -1;
    }
    return 0;
}

/* Store the planner's outcome (the job's lock held exclusively, and store_mu): the frontier, or
 * the failure why. */
static void install_plan(prs_server *s, job *j, prs_frontier *f, const char *text, size_t len,
                         double secs, const char *why)
{
    api_err e = {0, NULL, ""};
    int ok = store_begin(s->st) == 0 &&
             job_plan_finished(j, s->st, f, text, len, secs, why, &e) == 0 &&
             store_commit(s->st) == 0;
    if (!ok) {
        store_rollback(s->st);
        srv_log(s, PRS_LOG_ERROR, "msg=plan_store_failed job=%s detail=%s", j->id,
                e.msg[0] ? e.msg : store_error(s->st)->msg);
        table_reload(s, j);
    }
}

static void launch_queued(prs_server *s);

/* Mark the task's job as waiting for memory (on) or not, for its status. */
static void mark_waiting(plan_task *t, int on)
{
    pthread_rwlock_rdlock(&t->s->lock);
    job *j = t->j; /* cleared only under the table lock held exclusively */
    if (j) __atomic_store_n(&j->plan_waits_memory, on, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&t->s->lock);
}

/* Wait until the task's memory estimate fits --max-plan-memory beside those of the planners
 * running (alone it always fits: planq_check_plannable refused larger ones), then hold it in
 * s->plan_mem until the planner ends. PRS_ECANCELED when the task is canceled meanwhile. */
static int mem_acquire(plan_task *t)
{
    prs_server *s = t->s;
    double budget = (double)s->cfg.max_plan_memory;
    int waited = 0;
    pthread_mutex_lock(&s->task_mu);
    int must_wait = s->plan_mem > 0 && s->plan_mem + t->peak_bytes > budget;
    pthread_mutex_unlock(&s->task_mu);
    if (must_wait) mark_waiting(t, 1); /* the table lock is never taken under task_mu */
    pthread_mutex_lock(&s->task_mu);
    while (!__atomic_load_n(&t->cancel, __ATOMIC_ACQUIRE) && s->plan_mem > 0 &&
           s->plan_mem + t->peak_bytes > budget) {
        if (!waited++)
            srv_log(s, PRS_LOG_INFO,
                    "msg=planning_waits_memory job=%s need_mib=%.0f held_mib=%.0f limit_mib=%zu",
                    t->job_id, t->peak_bytes / 1048576.0, s->plan_mem / 1048576.0,
                    s->cfg.max_plan_memory >> 20);
        pthread_cond_wait(&s->plan_mem_cv, &s->task_mu);
    }
    int rc = __atomic_load_n(&t->cancel, __ATOMIC_ACQUIRE) ? PRS_ECANCELED : 0;
    if (!rc) {
        s->plan_mem += t->peak_bytes;
        t->holds_mem = 1;
    }
    pthread_mutex_unlock(&s->task_mu);
    if (must_wait) mark_waiting(t, 0);
    if (!rc && waited)
        srv_log(s, PRS_LOG_INFO, "msg=planning_got_memory job=%s held_mib=%.0f", t->job_id,
                s->plan_mem / 1048576.0);
    return rc;
}

/* Give back what mem_acquire held (task_mu held). */
static void mem_release(plan_task *t)
{
    if (!t->holds_mem) return;
    t->s->plan_mem -= t->peak_bytes;
    if (t->s->plan_mem < 1) t->s->plan_mem = 0; /* rounding */
    t->holds_mem = 0;
    pthread_cond_broadcast(&t->s->plan_mem_cv);
}

/* Plan task t's problem outside every lock: the frontier into *fp (NULL on failure, the reason
 * in err) and its plans.prs text into *text, the wall time into *secs. Returns the planner's
 * result (PRS_ECANCELED when stopped through on_plan_progress). */
static int mem_acquire(plan_task *t);

static int run_task(plan_task *t, prs_frontier **fp, char **text, size_t *len, double *secs,
                    prs_error *err)
{
    prs_server *s = t->s;
    prs_plan_opts o;
    planq_opts(s, &t->pipe, t->cost_model, &o);
    o.progress = on_plan_progress;
    o.ud = t;
    prs_frontier *f = NULL;
    double t0 = prs_mono_s();
    t->deadline = t0 + s->cfg.plan_timeout_s;
    const char *code;
    int rc =
        planq_check_plannable(s, t->profile, &o, &t->peak_bytes, &code, err->msg, sizeof err->msg)
            ? strcmp(code, "canceled") == 0 ? PRS_ECANCELED : PRS_EINVAL
            : 0;
    if (!rc)
        srv_log(s, PRS_LOG_INFO, "msg=planning_measured job=%s peak_mib=%.1f threads=%d", t->job_id,
                t->peak_bytes / 1048576.0, o.threads);
    if (!rc) rc = mem_acquire(t); /* the time waited for memory is not planning time */
    if (!rc) {
        t->deadline = prs_mono_s() + s->cfg.plan_timeout_s;
        rc = t->robust ? prs_plan_robust(t->profile, &o, &f, NULL, err)
                       : prs_plan(t->profile, &o, &f, err);
    }
    *secs = prs_mono_s() - t0;
    if (rc == PRS_ECANCELED && t->timed_out)
        snprintf(err->msg, sizeof err->msg,
                 "planning took longer than the server's limit of %g s (--plan-timeout): use a "
                 "larger unit_time_s",
                 s->cfg.plan_timeout_s);
    if (rc == 0 && prs_frontier_to_plans(f, text, len, err) != 0) {
        prs_frontier_free(f);
        f = NULL;
    }
    *fp = f;
    return rc;
}

static void *planner_main(void *arg)
{
    plan_task *t = arg;
    prs_server *s = t->s;
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    char *text = NULL;
    size_t len = 0;
    double secs = 0;
    int rc = run_task(t, &f, &text, &len, &secs, &err);
    pthread_rwlock_rdlock(&s->lock);
    job *j = t->j; /* cleared only under the table lock held exclusively */
    if (j) __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->lock);
    int canceled = rc == PRS_ECANCELED && !t->timed_out;
    if (j) pthread_mutex_lock(&s->store_mu); /* the store before the job's lock */
    if (j) pthread_rwlock_wrlock(j->lock);
    if (!j || j->deleted || canceled) {
        /* Deleted, completed, or the server is stopping (the job stays planning and is planned
         * again at the next start): nothing to store. */
        srv_log(s, PRS_LOG_INFO,
                "msg=planning_canceled job=%s seconds=%.3f progress_calls=%ld during=%s "
                "detail=%s",
                t->job_id, secs, t->calls, t->walking ? "walk" : "setup",
                !j || j->deleted               ? "job_deleted"
                : t->cancel == CANCEL_SHUTDOWN ? "shutdown"
                                               : "job_left");
        prs_frontier_free(f);
    } else {
        install_plan(s, j, f, text, len, secs, err.msg);
        pthread_mutex_lock(&s->m.mu);
        if (f) {
            s->m.planning_count++;
            s->m.planning_sum_s += secs;
            s->m.planning_last_s = secs;
        } else {
            s->m.planning_failed++;
        }
        pthread_mutex_unlock(&s->m.mu);
        char q[PRS_ERRMSG_MAX + 8];
        srv_log(s, f ? PRS_LOG_INFO : PRS_LOG_WARN,
                "msg=planned job=%s ok=%d seconds=%.3f points=%zu phase=%s%s%s", j->id, f != NULL,
                secs, f ? prs_frontier_size(f) : (size_t)0, job_phase_name(j->phase),
                f ? "" : " detail=", f ? "" : srv_kv_quote(err.msg, q, sizeof q));
    }
    pthread_mutex_lock(&s->task_mu);
    if (j) {
        j->planner_active = 0;
        double zero = 0;
        __atomic_store(&j->plan_started_s, &zero, __ATOMIC_RELAXED);
    }
    t->finished = 1;
    mem_release(t);
    PRS_ASSERT(s->nplanning > 0);
    s->nplanning--;
    launch_queued(s);
    pthread_mutex_unlock(&s->task_mu);
    if (j) {
        pthread_rwlock_unlock(j->lock);
        pthread_mutex_unlock(&s->store_mu);
        table_unpin(j);
    }
    free(text);
    return NULL;
}

/* Copy a profile row by row. */
static prs_profile *profile_copy(const prs_profile *p)
{
    prs_profile *c = prs_profile_new();
    const prs_profile_row *rows = prs_profile_rows(p);
    for (size_t i = 0; c && i < prs_profile_nrows(p); i++)
        if (prs_profile_add(c, &rows[i], NULL) != 0) {
            prs_profile_free(c);
            return NULL;
        }
    return c;
}

/* Join planner threads that have finished and drop queued tasks whose job went (lock held;
 * finished threads no longer need it). all: every task, waiting for running ones (shutdown:
 * they were canceled). */
static void reap_tasks(prs_server *s, int all)
{
    plan_task **pp = &s->tasks;
    while (*pp) {
        plan_task *t = *pp;
        if (all || t->finished) { /* all: finished is a running planner's to write */
            *pp = t->next;
            if (t->started) {
                if (all) pthread_rwlock_unlock(&s->lock);
                pthread_join(t->thread, NULL);
                if (all) pthread_rwlock_wrlock(&s->lock);
            }
            prs_profile_free(t->profile);
            free(t);
            if (all) pp = &s->tasks;
        } else {
            pp = &t->next;
        }
    }
}

/* Start the oldest queued planning if a planner slot is free (task_mu held). */
static void launch_queued(prs_server *s)
{
    if (__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE) || s->nplanning >= s->cfg.max_planners)
        return;
    plan_task *oldest = NULL;
    for (plan_task *t = s->tasks; t; t = t->next)
        if (!t->started && !t->finished) oldest = t; /* the list is newest first */
    if (!oldest) return;
    if (pthread_create(&oldest->thread, NULL, planner_main, oldest) != 0) {
        srv_log(s, PRS_LOG_ERROR, "msg=planner_not_started job=%s detail=no_thread",
                oldest->job_id);
        if (oldest->j) oldest->j->planner_active = 0;
        oldest->finished = 1;
        return;
    }
    oldest->started = 1;
    if (oldest->j) {
        double now = prs_mono_s();
        __atomic_store(&oldest->j->plan_started_s, &now, __ATOMIC_RELAXED);
    }
    s->nplanning++;
    PRS_ASSERT(s->nplanning <= s->cfg.max_planners);
    srv_log(s, PRS_LOG_INFO, "msg=planning job=%s", oldest->job_id);
}

void planq_start(prs_server *s, job *j)
{
    pthread_mutex_lock(&s->task_mu);
    reap_tasks(s, 0);
    int active = j->planner_active;
    pthread_mutex_unlock(&s->task_mu);
    if (active) return;
    plan_task *t = calloc(1, sizeof *t);
    if (t) t->profile = j->profile ? profile_copy(j->profile) : NULL;
    if (!t || !t->profile) {
        free(t);
        srv_log(s, PRS_LOG_ERROR, "msg=planner_not_started job=%s detail=out_of_memory", j->id);
        return;
    }
    t->s = s;
    t->j = j;
    snprintf(t->job_id, sizeof t->job_id, "%s", j->id);
    t->cost_model = j->spec.cost_model;
    t->robust = job_plans_robust(j);
    job_pipeline(j, &t->pipe);
    j->plan_done = j->plan_total = 0;
    pthread_mutex_lock(&s->task_mu);
    j->planner_active = 1;
    t->next = s->tasks;
    s->tasks = t;
    launch_queued(s);
    if (!t->started && !t->finished)
        srv_log(s, PRS_LOG_INFO, "msg=planning_queued job=%s running=%ld", j->id, s->nplanning);
    pthread_mutex_unlock(&s->task_mu);
}

/* Stop the planning of a job that left the planning phase or is deleted (the job's lock held
 * exclusively, or the table's): a queued one is dropped, a running one canceled through its
 * progress callback. */
void planq_cancel(prs_server *s, job *j)
{
    pthread_mutex_lock(&s->task_mu);
    for (plan_task *t = s->tasks; t; t = t->next) {
        if (t->j != j || t->finished) continue;
        if (!t->started) {
            t->finished = 1;
            j->planner_active = 0;
        } else {
            __atomic_store_n(&t->cancel, CANCEL_JOB_LEFT, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&s->plan_mem_cv); /* one waiting for memory stops waiting */
        }
    }
    pthread_mutex_unlock(&s->task_mu);
}

void planq_detach_locked(prs_server *s, job *j)
{
    pthread_mutex_lock(&s->task_mu);
    for (plan_task *t = s->tasks; t; t = t->next)
        if (t->j == j) t->j = NULL; /* its result is dropped */
    pthread_mutex_unlock(&s->task_mu);
}

void planq_stop_all(prs_server *s)
{
    /* Under task_mu: a finishing planner reads stopping there and, once it is set, starts
     * nothing and walks no list, so reap_tasks can unlink and free without it. */
    pthread_mutex_lock(&s->task_mu);
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    for (plan_task *t = s->tasks; t; t = t->next)
        __atomic_store_n(&t->cancel, CANCEL_SHUTDOWN, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s->plan_mem_cv);
    pthread_mutex_unlock(&s->task_mu);
    reap_tasks(s, 1); /* planner threads take the lock to finish: reap_tasks drops it to join */
}
