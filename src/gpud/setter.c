/* perseus-gpud's clock setters (docs/gpud.md, 'Clock changes'). In the system daemon each GPU has
 * a thread of its own, on an NVML handle of its own, that applies its SETs: the NVML call and the
 * read-back after it (up to 5 ms when the read-back lags) never hold up the poll loop, so one
 * GPU's change never waits behind another's on an 8-GPU node. The connection whose SET is being
 * applied reads no further request until its ACK is in its output (the protocol answers in
 * order); the thread wakes the loop through an eventfd, and the loop hands each ACK to its
 * connection. A connection that goes away while its SET
 * is applied waits for it before its lease is reset. Without a setter (private mode, a backend
 * other than NVML, a handle that did not open, tests feeding bytes) the loop applies the SET. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gpud.h"

enum { IDLE, QUEUED, RUNNING, DONE };

typedef struct setter {
    struct gpud_setters *all;
    pthread_t thread;
    pthread_cond_t cv; /* state changed (the thread waits for QUEUED, settle for DONE) */
    prs_gpu *g;        /* the thread's own handle; NULL: no thread, applied on the spot */
    int state;
    gpud_conn *c; /* whose SET (QUEUED to DONE) */
    gpud_apply_req req;
    gpud_apply res;
} setter;

struct gpud_setters {
    pthread_mutex_t mu;
    int wake_fd;
    int stop;
    int n;
    setter s[GPUD_MAX_GPUS];
};

static void *setter_main(void *arg)
{
    setter *s = arg;
    gpud_setters *S = s->all;
    pthread_mutex_lock(&S->mu);
    for (;;) {
        while (!S->stop && s->state != QUEUED)
            pthread_cond_wait(&s->cv, &S->mu);
        if (s->state != QUEUED) break; /* stopping: every SET queued was applied first */
        s->state = RUNNING;
        gpud_apply_req req = s->req;
        pthread_mutex_unlock(&S->mu);
        gpud_apply res;
        gpud_apply_clock(&req, &res);
        pthread_mutex_lock(&S->mu);
        s->res = res;
        s->state = DONE;
        pthread_cond_broadcast(&s->cv);
        uint64_t one = 1;
        while (write(S->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
    pthread_mutex_unlock(&S->mu);
    return NULL;
}

static void free_setters(gpud_setters *S)
{
    for (int i = 0; i < S->n; i++) {
        prs_gpu_close(S->s[i].g);
        pthread_cond_destroy(&S->s[i].cv);
    }
    if (S->wake_fd >= 0) close(S->wake_fd);
    pthread_mutex_destroy(&S->mu);
    free(S);
}

/* Open i's handle and start its thread; 0 when the GPU goes without one (applied on the spot). */
static int start_one(gpud *d, gpud_setters *S, int i)
{
    setter *s = &S->s[i];
    gpud_gpu *u = &d->gpus[i];
    prs_error err;
    if (strcmp(prs_gpu_backend(u->g), "nvml") != 0) return 0;
    if (prs_gpu_open_nvml_uuid(u->uuid, NULL, &s->g, &err) != 0) {
        gpud_log(GPUD_LOG_WARN, "msg=setter_handle gpu=%s effect=set_in_the_loop", u->uuid);
        s->g = NULL;
        return 0;
    }
    if (pthread_create(&s->thread, NULL, setter_main, s) == 0) return 1;
    prs_gpu_close(s->g);
    s->g = NULL;
    return PRS_EIO;
}

int gpud_setters_start(gpud *d)
{
    gpud_setters *S = calloc(1, sizeof *S);
    if (!S) return PRS_ENOMEM;
    S->wake_fd = -1;
    if (pthread_mutex_init(&S->mu, NULL) != 0) {
        free(S);
        return PRS_EIO;
    }
    for (; S->n < d->ngpus; S->n++) {
        S->s[S->n].all = S;
        if (pthread_cond_init(&S->s[S->n].cv, NULL) != 0) break;
    }
    d->setters = S;
    S->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int rc = S->n < d->ngpus || S->wake_fd < 0 ? PRS_EIO : 0, started = 0;
    for (int i = 0; !rc && i < S->n; i++) {
        int one = start_one(d, S, i);
        rc = one < 0 ? one : 0;
        started += one > 0;
    }
    if (rc || !started) gpud_setters_stop(d);
    if (!rc && started) gpud_log(GPUD_LOG_DEBUG, "msg=setters_started gpus=%d", started);
    return rc;
}

void gpud_setters_stop(gpud *d)
{
    gpud_setters *S = d->setters;
    if (!S) return;
    pthread_mutex_lock(&S->mu);
    S->stop = 1;
    for (int i = 0; i < S->n; i++)
        pthread_cond_broadcast(&S->s[i].cv);
    pthread_mutex_unlock(&S->mu);
    for (int i = 0; i < S->n; i++)
        if (S->s[i].g) pthread_join(S->s[i].thread, NULL);
    for (int i = 0; i < S->n; i++) /* a SET applied but not collected still locked its clock */
        if (S->s[i].state == DONE) d->gpus[i].locked_mhz = S->s[i].res.locked_mhz;
    free_setters(S);
    d->setters = NULL;
}

int gpud_setters_fd(const gpud *d)
{
    return d->setters ? d->setters->wake_fd : -1;
}

int gpud_setter_submit(gpud *d, gpud_conn *c, const gpud_apply_req *r)
{
    gpud_setters *S = d->setters;
    int i = c->lease ? (int)(c->lease - d->gpus) : -1;
    if (!S || i < 0 || i >= S->n || !S->s[i].g) return PRS_EINVAL;
    setter *s = &S->s[i];
    pthread_mutex_lock(&S->mu);
    int free_slot = s->state == IDLE && !S->stop;
    if (free_slot) {
        s->req = *r;
        s->req.g = s->g;
        s->c = c;
        s->state = QUEUED;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&S->mu);
    if (!free_slot) return PRS_EINVAL;
    c->setting = 1;
    return 0;
}

/* Take slot i's result when it is DONE (wait for it when wait is set); 1 when taken. */
static int take(gpud *d, int i, int wait, gpud_conn **c, gpud_apply *res)
{
    gpud_setters *S = d->setters;
    setter *s = &S->s[i];
    pthread_mutex_lock(&S->mu);
    while (wait && (s->state == QUEUED || s->state == RUNNING))
        pthread_cond_wait(&s->cv, &S->mu);
    int done = s->state == DONE;
    if (done) {
        *c = s->c;
        *res = s->res;
        s->state = IDLE;
        s->c = NULL;
    }
    pthread_mutex_unlock(&S->mu);
    if (done) {
        d->gpus[i].locked_mhz = res->locked_mhz;
        (*c)->setting = 0;
    }
    return done;
}

int gpud_setters_collect(gpud *d, gpud_setter_done *done, int cap)
{
    gpud_setters *S = d->setters;
    if (!S) return 0;
    uint64_t v;
    while (read(S->wake_fd, &v, sizeof v) < 0 && errno == EINTR)
        ;
    int n = 0;
    for (int i = 0; i < S->n && n < cap; i++)
        if (S->s[i].g && take(d, i, 0, &done[n].c, &done[n].res)) n++;
    return n;
}

void gpud_setter_settle(gpud *d, gpud_conn *c)
{
    if (!c->setting || !d->setters || !c->lease) return;
    gpud_conn *owner;
    gpud_apply res;
    take(d, (int)(c->lease - d->gpus), 1, &owner, &res); /* its ACK goes nowhere */
}
