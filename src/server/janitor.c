/* Deleting jobs, and the janitor thread. A deletion (a DELETE, or the janitor's expiry of a job
 * past --retention or --job-idle-timeout) marks the job deleted in one short transaction and
 * unlinks it from the table; the janitor then purges its rows in bounded batches
 * (store_purge_step), store_mu taken and released around each, so no lock is held across a
 * purge, and gives the space back to the file system a bounded step at a time. */
#include "perseus/clock.h"

#include <time.h>

#include "server_int.h"

/* Take a retired job out of the table (the table lock held exclusively only for the unlink) and
 * drop the table's reference; a planner working on it is detached and its result dropped. */
void janitor_unlink_job(prs_server *s, job *j)
{
    pthread_rwlock_wrlock(&s->lock);
    table_unlink_locked(s, j);
    planq_detach_locked(s, j);
    pthread_rwlock_unlock(&s->lock);
    table_unpin(j);
}

/* Delete a job (store_mu and the job's lock held exclusively): marked deleted in the store in
 * one short transaction, whatever it holds, and in memory (requests that reach it from now on
 * answer 404); its planner is stopped. The caller then unlinks it (janitor_unlink_job) and wakes
 * the janitor, which purges its rows in bounded batches. why: "request", "admin", "retention" or
 * "idle", for the log. */
int janitor_retire_job(prs_server *s, job *j, const char *why, api_err *e)
{
    if (store_begin(s->st) || store_mark_deleting(s->st, j->id) || store_commit(s->st)) {
        store_rollback(s->st);
        return job_store_fail(e, s->st);
    }
    j->deleted = 1;
    planq_cancel(s, j);
    srv_log(s, PRS_LOG_INFO, "msg=job_deleted job=%s phase=%s by=%s", j->id,
            job_phase_name(j->phase), why);
    return 0;
}

/* Rows a purge deletes in one transaction (store_purge_step): a few milliseconds of store_mu,
 * after which the requests waiting for the store go first. */
#define PURGE_BATCH_ROWS 2000L

/* Why job j is to be deleted now ("retention", "idle"), or NULL (its lock held). */
static const char *expiry_of(const prs_server *s, const job *j, long long now)
{
    if (j->deleted) return NULL;
    int finished = j->phase == JOB_DONE || j->phase == JOB_FAILED;
    if (finished && s->cfg.retention_s >= 0 && j->finished_unix &&
        (double)(now - j->finished_unix) >= s->cfg.retention_s)
        return "retention";
    long long active = __atomic_load_n(&j->active_unix, __ATOMIC_RELAXED);
    if (!finished && s->cfg.job_idle_timeout_s >= 0 &&
        (double)(now - active) >= s->cfg.job_idle_timeout_s)
        return "idle";
    return NULL;
}

/* Delete the finished jobs whose retention has passed and the unfinished ones no request
 * reached for --job-idle-timeout, each as a DELETE would (retire_job). */
static void expire_jobs(prs_server *s)
{
    long long now = (long long)time(NULL);
    size_t n = 0;
    job **all = table_pin_all(s, &n);
    for (size_t i = 0; i < n; i++) {
        job *j = all[i];
        pthread_rwlock_rdlock(j->lock);
        const char *why = expiry_of(s, j, now);
        pthread_rwlock_unlock(j->lock);
        if (!why) continue;
        pthread_mutex_lock(&s->store_mu);
        pthread_rwlock_wrlock(j->lock);
        api_err e = {0, NULL, ""};
        why = expiry_of(s, j, now); /* again: a request may have come meanwhile */
        int retired = why && janitor_retire_job(s, j, why, &e) == 0;
        pthread_rwlock_unlock(j->lock);
        pthread_mutex_unlock(&s->store_mu);
        if (why && !retired) srv_log(s, PRS_LOG_ERROR, "msg=expiry_failed detail=%s", e.msg);
        if (retired) janitor_unlink_job(s, j);
    }
    table_unpin_all(all, n);
}

static int janitor_stopping(prs_server *s)
{
    return __atomic_load_n(&s->janitor_stop, __ATOMIC_RELAXED);
}

/* Pages of free space given back to the file system per step (4 MiB of 4 KiB pages). */
#define VACUUM_STEP_PAGES 1024L

/* Give the space of purged rows back to the file system, a bounded step under store_mu at a
 * time (a database made by an older server, without incremental auto-vacuum, keeps it). */
static void shrink_store(prs_server *s)
{
    for (long left = 1; left > 0 && !janitor_stopping(s);) {
        pthread_mutex_lock(&s->store_mu);
        int rc = store_vacuum_step(s->st, VACUUM_STEP_PAGES, &left);
        if (rc) srv_log(s, PRS_LOG_ERROR, "msg=vacuum_failed detail=%s", store_error(s->st)->msg);
        pthread_mutex_unlock(&s->store_mu);
        if (rc) return;
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* Purge the rows of the jobs marked deleted, a bounded batch per transaction, store_mu taken
 * and released around each: no lock is held across the whole purge. A failure is logged and
 * the purge tried again at the janitor's next turn; a shutdown stops it, and the next start
 * resumes it. */
static void purge_deleted(prs_server *s)
{
    while (!janitor_stopping(s)) {
        char id[32];
        long n = 0;
        int done = 0;
        pthread_mutex_lock(&s->store_mu);
        int rc = store_next_deleting(s->st, id);
        if (!rc && id[0]) {
            rc = store_begin(s->st);
            if (!rc) rc = store_purge_step(s->st, id, PURGE_BATCH_ROWS, &n, &done);
            if (!rc) rc = store_commit(s->st);
            if (rc) store_rollback(s->st);
        }
        if (rc) srv_log(s, PRS_LOG_ERROR, "msg=purge_failed detail=%s", store_error(s->st)->msg);
        pthread_mutex_unlock(&s->store_mu);
        if (rc) return;
        if (!id[0]) {
            shrink_store(s);
            return;
        }
        if (done) srv_log(s, PRS_LOG_DEBUG, "msg=job_purged job=%.16s", id);
        /* Leave the store to the requests that waited for it during the batch: a mutex is not
         * fair, and this thread would otherwise take it again at once. */
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
    }
}

void janitor_wake(prs_server *s)
{
    pthread_mutex_lock(&s->janitor_mu);
    s->purge_pending = 1;
    pthread_cond_signal(&s->janitor_cv);
    pthread_mutex_unlock(&s->janitor_mu);
}

/* The janitor's period: a quarter of the shorter of the retention and the idle timeout (at
 * least 50 ms, at most 30 s). */
static double janitor_period_s(const prs_server *s)
{
    double p = 120;
    if (s->cfg.retention_s >= 0 && s->cfg.retention_s < p) p = s->cfg.retention_s;
    if (s->cfg.job_idle_timeout_s >= 0 && s->cfg.job_idle_timeout_s < p)
        p = s->cfg.job_idle_timeout_s;
    p /= 4;
    return p < 0.05 ? 0.05 : p > 30 ? 30 : p;
}

/* The janitor thread: expires jobs every period and purges deleted ones when woken (and at
 * start, for deletions a restart interrupted), until the server stops. */
static void *janitor_main(void *arg)
{
    prs_server *s = arg;
    double period = janitor_period_s(s), next = prs_mono_s() + period;
    pthread_mutex_lock(&s->janitor_mu);
    s->purge_pending = 1;
    while (!s->janitor_stop) {
        if (!s->purge_pending && prs_mono_s() < next) {
            struct timespec until = prs_mono_timespec(next);
            pthread_cond_timedwait(&s->janitor_cv, &s->janitor_mu, &until);
            continue;
        }
        int purge = s->purge_pending;
        s->purge_pending = 0;
        pthread_mutex_unlock(&s->janitor_mu);
        if (prs_mono_s() >= next) {
            expire_jobs(s);
            next = prs_mono_s() + period;
            purge = 1;
        }
        if (purge) purge_deleted(s);
        pthread_mutex_lock(&s->janitor_mu);
    }
    pthread_mutex_unlock(&s->janitor_mu);
    return NULL;
}

int janitor_start(prs_server *s, prs_error *err)
{
    if (pthread_create(&s->janitor, NULL, janitor_main, s) != 0)
        return prs_error_set(err, PRS_EIO, "cannot start the janitor thread");
    s->janitor_started = 1;
    return 0;
}

void janitor_join(prs_server *s)
{
    if (!s->janitor_started) return;
    pthread_mutex_lock(&s->janitor_mu);
    __atomic_store_n(&s->janitor_stop, 1, __ATOMIC_RELAXED);
    pthread_cond_signal(&s->janitor_cv);
    pthread_mutex_unlock(&s->janitor_mu);
    pthread_join(s->janitor, NULL);
    s->janitor_started = 0;
}
