/* The jobs table: every job the server holds, in hash buckets by id, each with its own lock
 * and a reference count. The table lock (s->lock) is held only to look a job up and take a
 * reference, or to link or unlink one; a job's memory stays while a reference is held, even
 * after it was deleted and unlinked. Also the reload of a job from the store after a failed
 * transaction, which swaps the job's contents in place so every pointer to it stays valid. */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_int.h"
#include "prs_assert.h"

static unsigned bucket_of(const char *id)
{
    unsigned h = 2166136261u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 16777619u;
    return h % JOB_BUCKETS;
}

static job *find_job(prs_server *s, const char *id)
{
    for (job *j = s->jobs[bucket_of(id)]; j; j = j->next)
        if (strcmp(j->id, id) == 0) return j;
    return NULL;
}

static void job_log_sink(void *ud, int level, const char *line)
{
    srv_log(ud, (prs_log_level)level, "%s", line);
}

/* Writers first: polls hold a job's lock shared all the time, and without the preference a
 * posted result could wait behind them indefinitely. */
int table_rwlock_init(pthread_rwlock_t *l)
{
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(l, &ra);
    pthread_rwlockattr_destroy(&ra);
    return rc;
}

/* Free a job and the lock the server gave it. */
static void table_job_drop(job *j)
{
    if (j && j->lock) {
        pthread_rwlock_destroy(j->lock);
        free(j->lock);
        j->lock = NULL;
    }
    job_free(j);
}

int table_add(prs_server *s, job *j, int counted)
{
    j->lock = malloc(sizeof *j->lock);
    if (!j->lock || table_rwlock_init(j->lock) != 0) {
        free(j->lock);
        j->lock = NULL;
        return -1;
    }
    j->log = job_log_sink;
    j->log_ud = s;
    j->refs = 1;
    j->deleted = 0;
    j->active_unix = (long long)time(NULL);
    unsigned b = bucket_of(j->id);
    j->next = s->jobs[b];
    s->jobs[b] = j;
    if (!counted) {
        s->njobs++;
        s->nranks += j->world;
    }
    return 0;
}

job *table_pin(prs_server *s, const char *id)
{
    pthread_rwlock_rdlock(&s->lock);
    job *j = find_job(s, id);
    if (j) __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&s->lock);
    return j;
}

void table_unpin(job *j)
{
    if (!j) return;
    long left = __atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL);
    PRS_ASSERT(left >= 0); /* every unpin matches a pin, or the table's own reference */
    if (left == 0) table_job_drop(j);
}

job **table_pin_all(prs_server *s, size_t *n)
{
    *n = 0;
    pthread_rwlock_rdlock(&s->lock);
    job **all = s->njobs > 0 ? malloc((size_t)s->njobs * sizeof(job *)) : NULL;
    for (int b = 0; all && b < JOB_BUCKETS; b++)
        for (job *j = s->jobs[b]; j && *n < (size_t)s->njobs; j = j->next) {
            __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
            all[(*n)++] = j;
        }
    pthread_rwlock_unlock(&s->lock);
    return all;
}

void table_unpin_all(job **all, size_t n)
{
    for (size_t i = 0; i < n; i++)
        table_unpin(all[i]);
    free(all);
}

void table_unlink_locked(prs_server *s, job *j)
{
    job **pp = &s->jobs[bucket_of(j->id)];
    while (*pp && *pp != j)
        pp = &(*pp)->next;
    PRS_ASSERT(*pp == j && s->njobs > 0); /* unlinked once: by the deletion that retired it */
    if (*pp) *pp = j->next;
    s->njobs--;
    s->nranks -= j->world;
}

void table_free_all(prs_server *s)
{
    for (int b = 0; b < JOB_BUCKETS; b++)
        while (s->jobs[b]) {
            job *j = s->jobs[b];
            s->jobs[b] = j->next;
            table_job_drop(j);
        }
}

typedef struct reload_ctx {
    store *st;
    const char *id;
    job *found;
    int action;
    prs_error err;
} reload_ctx;

/* The row of the job to reload: load it and stop the walk (1), or its failure. */
static int reload_one_st(void *ud, const store_job_row *row)
{
    reload_ctx *c = ud;
    if (strcmp(row->id, c->id) != 0) return 0;
    int rc = job_load(c->st, row, &c->found, &c->action, &c->err);
    return rc ? rc : 1;
}

/* Copy every field of a job but its reference count, which other threads change meanwhile. */
static void job_copy_but_refs(job *dst, const job *src)
{
    size_t a = offsetof(job, refs), b = a + sizeof dst->refs;
    memcpy(dst, src, a);
    memcpy((char *)dst + b, (const char *)src + b, sizeof *dst - b);
}

int table_reload(prs_server *s, job *j)
{
    reload_ctx c = {s->st, j->id, NULL, 0, {0, ""}};
    int rc = store_each_job(s->st, reload_one_st, &c);
    if (rc < 0 && !c.found && c.err.code == 0) c.err = *store_error(s->st);
    if (!c.found) {
        srv_log(s, PRS_LOG_ERROR, "msg=reload_failed job=%s detail=%s", j->id, c.err.msg);
        return PRS_EIO;
    }
    /* Swap contents so pointers to j (planner tasks, the table, references) and its lock stay
     * valid; its reference count is left alone (others take references meanwhile). */
    pthread_mutex_lock(&s->task_mu);
    job tmp;
    job_copy_but_refs(&tmp, c.found);
    tmp.next = j->next;
    tmp.planner_active = j->planner_active;
    tmp.plan_started_s = j->plan_started_s; /* written under task_mu, held here */
    tmp.log = j->log;
    tmp.log_ud = j->log_ud;
    tmp.lock = j->lock;
    tmp.deleted = j->deleted;
    tmp.active_unix = __atomic_load_n(&j->active_unix, __ATOMIC_RELAXED);
    job_copy_but_refs(c.found, j);
    job_copy_but_refs(j, &tmp);
    pthread_mutex_unlock(&s->task_mu);
    c.found->next = NULL;
    c.found->lock = NULL;
    job_free(c.found);
    return 0;
}
