/* The thread pool of workq.h: one mutex-protected FIFO list and a condition variable. */
#define _GNU_SOURCE /* gettid */
#include "workq.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

struct workq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    workq_item *head, *tail;
    int stopping;
    int nice;
    int nthreads;
    pthread_t threads[];
};

static void *workq_main(void *arg)
{
    workq *q = arg;
    if (q->nice) /* best effort: a failure leaves the thread at the caller's priority */
        (void)setpriority(PRIO_PROCESS, (id_t)gettid(), getpriority(PRIO_PROCESS, 0) + q->nice);
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stopping)
            pthread_cond_wait(&q->cv, &q->mu);
        workq_item *it = q->head;
        if (!it) break; /* stopping, and nothing left */
        q->head = it->next;
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        it->fn(it->arg);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int workq_start(int nthreads, int nice, workq **out, prs_error *err)
{
    *out = NULL;
    if (nthreads < 1) return prs_error_set(err, PRS_EINVAL, "a work queue needs a thread");
    workq *q = calloc(1, sizeof *q + sizeof q->threads[0] * (size_t)nthreads);
    if (!q) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    q->nice = nice;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    for (; q->nthreads < nthreads; q->nthreads++)
        if (pthread_create(&q->threads[q->nthreads], NULL, workq_main, q) != 0) {
            workq_stop(q);
            return prs_error_set(err, PRS_EIO, "cannot start a worker thread");
        }
    *out = q;
    return 0;
}

void workq_push(workq *q, workq_item *it, void (*fn)(void *arg), void *arg)
{
    it->fn = fn;
    it->arg = arg;
    it->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void workq_stop(workq *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->nthreads; i++)
        pthread_join(q->threads[i], NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}
