/* perseus-gpud's energy readings for LIST and READ (docs/gpud.md, 'Energy readings').
 *
 * Reading a GPU's energy counter can keep a CPU busy for milliseconds (an H100: about 3 ms, and
 * up to 30), and the poll loop must never wait on one: a clock request queued behind it holds its
 * trainer's stream (the host function that asked waits for the answer). So in the system daemon
 * a thread of its own, on NVML handles of its own, reads every GPU's counter every
 * GPUD_ENERGY_PERIOD_S while LIST or READ was asked in the last GPUD_ENERGY_LINGER_S, and every
 * GPUD_ENERGY_IDLE_S otherwise; LIST and READ answer at once with the latest reading. Other NVML
 * calls on the same GPU do not wait for a read in progress (measured on an H100 with
 * bench/gpu_probe: clock and power reads beside a thread reading the counter kept their median
 * cost). The first readings are taken before the daemon serves. Without a reader handle (private
 * mode, a backend other than NVML, a handle that did not open) the counter is read on the spot. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpud.h"

struct gpud_energy {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int stop;
    double wanted_until; /* prs_mono_s until which readings are asked for */
    int n;
    prs_gpu *g[GPUD_MAX_GPUS]; /* the reader's handles (NULL: read on the spot) */
    uint64_t mj[GPUD_MAX_GPUS];
    int state[GPUD_MAX_GPUS]; /* 0: no reading yet, 1: mj holds one, -1: the read failed */
};

/* One pass over the GPUs, each read outside the lock; stops early when asked to stop (a read can
 * take tens of milliseconds, and the lent GPUs are reset after the reader stops). A GPU whose
 * read starts or stops failing is logged once. */
static void read_all(gpud_energy *e)
{
    for (int i = 0; i < e->n; i++) {
        if (!e->g[i]) continue;
        uint64_t v = 0;
        int ok = prs_gpu_energy_mj(e->g[i], &v) == 0;
        pthread_mutex_lock(&e->mu);
        int was = e->state[i], stop = e->stop;
        e->state[i] = ok ? 1 : -1;
        if (ok) e->mj[i] = v;
        pthread_mutex_unlock(&e->mu);
        if (!ok && was >= 0)
            gpud_log(GPUD_LOG_WARN, "msg=energy_read_failed gpu_index=%d detail=%s", i,
                     prs_gpu_errmsg(e->g[i]));
        else if (ok && was < 0)
            gpud_log(GPUD_LOG_INFO, "msg=energy_read_recovered gpu_index=%d", i);
        if (stop) return;
    }
}

/* Under e->mu: waits until the next pass is due (GPUD_ENERGY_PERIOD_S while readings are asked
 * for, GPUD_ENERGY_IDLE_S otherwise), a request ends a quiet spell, or stop. */
static void wait_turn(gpud_energy *e)
{
    double now = prs_mono_s();
    int quiet = now >= e->wanted_until;
    double until = now + (quiet ? GPUD_ENERGY_IDLE_S : GPUD_ENERGY_PERIOD_S);
    struct timespec ts = prs_mono_timespec(until);
    while (!e->stop && !(quiet && prs_mono_s() < e->wanted_until) &&
           pthread_cond_timedwait(&e->cv, &e->mu, &ts) == 0)
        ;
}

/* gpud_energy_start took the first readings: wait, then read, until stopped. */
static void *reader_main(void *arg)
{
    gpud_energy *e = arg;
    pthread_mutex_lock(&e->mu);
    for (wait_turn(e); !e->stop; wait_turn(e)) {
        pthread_mutex_unlock(&e->mu);
        read_all(e);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void free_energy(gpud_energy *e)
{
    for (int i = 0; i < e->n; i++)
        prs_gpu_close(e->g[i]);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

int gpud_energy_start(gpud *d)
{
    gpud_energy *e = calloc(1, sizeof *e);
    if (!e) return PRS_ENOMEM;
    if (prs_sync_init_mono(&e->mu, &e->cv)) {
        free(e);
        return PRS_EIO;
    }
    e->n = d->ngpus;
    int handles = 0;
    for (int i = 0; i < d->ngpus; i++) {
        gpud_gpu *u = &d->gpus[i];
        prs_error err;
        if (strcmp(prs_gpu_backend(u->g), "nvml") != 0) continue;
        if (prs_gpu_open_nvml_uuid(u->uuid, NULL, &e->g[i], &err) == 0)
            handles++;
        else
            gpud_log(GPUD_LOG_WARN, "msg=energy_reader_handle gpu=%s effect=read_on_the_spot",
                     u->uuid);
    }
    if (handles) read_all(e); /* before serving: no request waits for a first reading */
    if (!handles || pthread_create(&e->thread, NULL, reader_main, e) != 0) {
        free_energy(e);
        return handles ? PRS_EIO : 0;
    }
    d->energy = e;
    gpud_log(GPUD_LOG_DEBUG, "msg=energy_reader_started gpus=%d", handles);
    return 0;
}

void gpud_energy_stop(gpud *d)
{
    gpud_energy *e = d->energy;
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    free_energy(e);
    d->energy = NULL;
}

int gpud_energy_get(gpud *d, gpud_gpu *u, uint64_t *mj)
{
    gpud_energy *e = d->energy;
    int i = (int)(u - d->gpus), state = 0;
    if (e && i >= 0 && i < e->n && e->g[i]) {
        pthread_mutex_lock(&e->mu);
        double now = prs_mono_s();
        if (now >= e->wanted_until) pthread_cond_signal(&e->cv); /* a quiet spell ends */
        e->wanted_until = now + GPUD_ENERGY_LINGER_S;
        state = e->state[i];
        *mj = e->mj[i];
        pthread_mutex_unlock(&e->mu);
    }
    if (state == 0) return prs_gpu_energy_mj(u->g, mj); /* on the spot */
    return state > 0 ? 0 : PRS_EGPU;
}
