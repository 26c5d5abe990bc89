/* Measurement on a device stream (docs/measurement.md): the hooks only enqueue, nothing waits
 * for the GPU.
 *
 * begin records a CUDA event before the computation and end one after it; when the planned clock
 * of the computation differs from the clock requested before it, begin first enqueues a host
 * function that requests the clock, so it changes when the GPU gets there, however far ahead the
 * host runs; the host function only sends the request (the stream never waits for perseus-gpud),
 * and the answer, when it comes, says which clock the computations after it ran at. Each iteration
 * starts with a host function that notes CLOCK_MONOTONIC followed by an event: the anchor that puts
 * the iteration's device times on the host clock, where the energy counter's readings are.
 *
 * Ended iterations wait in a FIFO until their last event completed (queried, never waited for,
 * except when the FIFO is full and at shutdown). Then their windows' times are the elapsed times
 * between events, exact, and their energies come from the round's attribution (attrib.h): every
 * profiling round (one clock for every computation) fits one power per (chunk, instruction) and
 * one for the time in between (the power while blocked) to the energy counter's readings, taken
 * by the sampler thread (sampler.h), over the device timeline. A window's energy is its kind's
 * power times its time. An iteration is resolved once its round's fit is usable; in the other
 * phases once the counter has a reading past its end, its energy then read off the counter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/clock.h"
#include "client_int.h"

#define PEND_MAX 64 /* iterations in flight before begin waits for the oldest */

/* ---- host functions (run on the driver's thread, in stream order) ---- */

static void on_anchor(void *user)
{
    prs__client_hostcall *h = user;
    h->host_s = prs_mono_s();
    /* Every clock change before this point of the stream was asked for: what the controller
     * confirms now is in effect here (-1 while an answer is still due). */
    h->in_effect = h->c->ctl ? prs_clockctl_confirmed(h->c->ctl) : h->mhz;
    atomic_store_explicit(&h->done, 1, memory_order_release);
}

/* Send the change and go on: the stream never waits for perseus-gpud. Its answer comes later and
 * tags the computations after this point (resolve.c's follow); the controller's INLINE mode
 * answers at once. */
static void on_clock(void *user)
{
    prs__client_hostcall *h = user;
    prs_client *c = h->c;
    h->result = prs_clockctl_set(c->ctl, h->mhz);
    h->request = prs_clockctl_last_request(c->ctl);
    h->in_effect = h->request > 0 ? -1 : prs_clockctl_confirmed(c->ctl);
    atomic_store_explicit(&h->done, 1, memory_order_release);
}

static int enqueue_call(prs_client *c, prs__client_hostcall *h, void (*fn)(void *))
{
    if (!h) return PRS_ENOMEM;
    int rc = prs_stream_host_fn(c->dev->stream, fn, h);
    if (rc) prs__client_call_put(c, h);
    return rc;
}

/* ---- iterations in flight ---- */

/* Open the iteration's anchor: a host function noting the host time, then the start event. */
static int open_anchor(prs_client *c, prs__client_pend *p)
{
    prs__client_hostcall *h = prs__client_call_get(c);
    /* Measure only: the clock read now is the iteration's tag (-1: unknown, no windows). */
    if (h) h->mhz = c->ctl ? 0 : prs__client_local_clock(c);
    if (h) h->enq_s = prs_mono_s();
    int rc = enqueue_call(c, h, on_anchor);
    if (rc) return rc;
    p->anchor = h;
    p->start = prs__client_event_get(c);
    if (!p->start) return PRS_ENOMEM;
    return prs_event_record(c->dev->stream, p->start);
}

static int dev_start_iteration(prs_client *c)
{
    prs__client_dev *d = c->dev;
    if (!d->cur) {
        d->cur = prs__client_pend_new();
        if (!d->cur) return PRS_ENOMEM;
        int rc = open_anchor(c, d->cur);
        if (rc) return rc;
    }
    prs__client_adopt_schedule(c);
    if (c->reset_clock) { /* the job ended: default clocks, in stream order */
        c->reset_clock = 0;
        if (prs__client_dev_request_clock(c, 0))
            atomic_fetch_add_explicit(&c->clock_failures, 1, memory_order_relaxed);
    }
    d->cur->iteration = c->iter_no;
    d->cur->round = c->cur.round;
    d->cur->plan_id = c->cur.plan_id;
    d->cur->profiling = prs__client_profiling(c);
    c->iter_started = 1;
    return 0;
}

static int grow_pend_ops(prs__client_pend *p)
{
    if (p->n_ops < p->cap_ops) return 0;
    int cap = p->cap_ops ? 2 * p->cap_ops : 64;
    prs__client_devop *o = realloc(p->ops, sizeof *o * (size_t)cap);
    if (!o) return PRS_ENOMEM;
    p->ops = o;
    p->cap_ops = cap;
    return 0;
}

/* Ask for clock mhz (0: default) in stream order. */
static int request_clock(prs_client *c, int mhz, prs__client_hostcall **out)
{
    if (!c->dev->cur) return PRS_EINVAL;
    prs__client_hostcall *h = prs__client_call_get(c);
    if (h) h->mhz = mhz;
    int rc = enqueue_call(c, h, on_clock);
    if (rc) return rc;
    c->dev->requested = mhz;
    atomic_store_explicit(&c->clock_mhz, mhz, memory_order_relaxed);
    *out = h;
    return 0;
}

/* Keep a clock change that no computation of p carries (the iteration's closing changes, in
 * stream order, each with its place among the computations), so that the clock it sets is
 * followed. */
static void keep_change(prs__client_pend *p, prs__client_hostcall *h)
{
    if (!h) return;
    h->before_op = p->n_ops;
    h->next = NULL;
    prs__client_hostcall **at = &p->closing;
    while (*at)
        at = &(*at)->next;
    *at = h;
}

/* A clock change outside a computation (a finished job's reset), in stream order. */
int prs__client_dev_request_clock(prs_client *c, int mhz)
{
    prs__client_hostcall *h = NULL;
    int rc = request_clock(c, mhz, &h);
    if (rc) return rc;
    keep_change(c->dev->cur, h);
    return 0;
}

/* begin failed after enqueueing o's clock change: the change stays in the stream, so keep it. */
static int begin_failed(prs_client *c, prs__client_devop *o, int rc)
{
    prs__client_event_put(c, o->b);
    keep_change(c->dev->cur, o->change);
    o->b = NULL;
    o->change = NULL;
    return rc;
}

int prs__client_dev_begin(prs_client *c, prs_instr instr, int microbatch, int chunk)
{
    prs__client_dev *d = c->dev;
    if (c->in_window) return PRS_EINVAL;
    if (!c->iter_started) {
        int rc = dev_start_iteration(c);
        if (rc) return rc;
    }
    prs__client_pend *p = d->cur;
    if (grow_pend_ops(p)) return PRS_ENOMEM;
    int global;
    int order = prs__client_check_order(c, instr, microbatch, chunk, &global);
    prs__client_devop *o = &p->ops[p->n_ops];
    memset(o, 0, sizeof *o);
    o->instr = instr;
    o->microbatch = microbatch;
    o->chunk = global;
    o->local_chunk = chunk;
    int f = prs__client_planned_clock(c);
    if (f > 0 && f != d->requested) {
        int rc = request_clock(c, f, &o->change);
        if (rc) return rc;
    }
    o->b = prs__client_event_get(c);
    if (!o->b) return begin_failed(c, o, PRS_ENOMEM);
    int rc = prs_event_record(d->stream, o->b);
    if (rc) return begin_failed(c, o, rc);
    c->in_window = 1;
    return order;
}

int prs__client_dev_other_begin(prs_client *c)
{
    prs__client_dev *d = c->dev;
    if (c->in_window) return PRS_EINVAL;
    if (!c->iter_started) {
        int rc = dev_start_iteration(c);
        if (rc) return rc;
    }
    prs__client_pend *p = d->cur;
    if (grow_pend_ops(p)) return PRS_ENOMEM;
    prs__client_devop *o = &p->ops[p->n_ops];
    memset(o, 0, sizeof *o);
    o->other = 1;
    o->chunk = -1;
    o->b = prs__client_event_get(c);
    if (!o->b) return PRS_ENOMEM;
    int rc = prs_event_record(d->stream, o->b);
    if (rc) return begin_failed(c, o, rc);
    c->in_window = 1;
    c->open_other = 1;
    return 0;
}

/* Record the open window's end event; 0, or the error (the window stays open). */
static int close_window(prs_client *c)
{
    prs__client_dev *d = c->dev;
    prs__client_devop *o = &d->cur->ops[d->cur->n_ops];
    o->e = prs__client_event_get(c);
    if (!o->e) return PRS_ENOMEM;
    int rc = prs_event_record(d->stream, o->e);
    if (rc) {
        prs__client_event_put(c, o->e); /* the window stays open: end may be tried again */
        o->e = NULL;
        return rc;
    }
    c->in_window = 0;
    c->open_other = 0;
    d->cur->n_ops++;
    return 0;
}

int prs__client_dev_other_end(prs_client *c)
{
    if (!c->in_window || !c->open_other) return PRS_EINVAL;
    return close_window(c);
}

int prs__client_dev_end(prs_client *c, prs_instr instr, int microbatch, int chunk)
{
    if (!c->in_window || c->open_other) return PRS_EINVAL;
    int rc = close_window(c);
    if (rc) return rc;
    c->op++;
    return prs__client_check_end(c, instr, microbatch, chunk);
}

/* A window left open at the iteration's end (begin without end): closed here, so that its
 * events come back and its clock change is followed; the iteration reports no windows. */
static void close_open_window(prs_client *c, prs__client_pend *p)
{
    prs__client_devop *o = &p->ops[p->n_ops];
    c->bad_order = 1;
    c->in_window = 0;
    c->open_other = 0;
    o->e = prs__client_event_get(c);
    if (o->e && prs_event_record(c->dev->stream, o->e) == 0) {
        p->n_ops++;
        p->open_closed = 1;
        return;
    }
    prs__client_event_put(c, o->e);
    o->e = NULL;
    begin_failed(c, o, 0);
}

int prs__client_dev_iteration_end(prs_client *c, double wall_s)
{
    prs__client_dev *d = c->dev;
    if (!c->iter_started) return 0;
    if (c->in_window) close_open_window(c, d->cur);
    prs__client_pend *p = d->cur, *next = prs__client_pend_new();
    if (!next) return PRS_ENOMEM;
    /* This iteration's end is the next one's start: one anchor and one event serve both. */
    int rc = open_anchor(c, next);
    if (rc) {
        prs__client_dev_pend_free(c, next);
        return rc;
    }
    p->end = next->start;
    p->end_anchor = next->anchor;
    p->wall_s = wall_s;
    p->bad_order = c->bad_order;
    p->phase_reportable = prs__client_phase_reports(c);
    d->cur = next;
    prs__client_dev_push(c, p);
    c->iter_no++;
    c->op = 0;
    c->in_window = 0;
    c->bad_order = 0;
    c->iter_started = 0;
    prs__client_dev_poll(c, d->n_pend >= PEND_MAX);
    return 0;
}

static int start_sampler(prs_client *c, prs_gpu *g, prs_error *err)
{
    prs__client_sampler_opts so;
    prs__client_sampler_opts_init(&so);
    so.poll_s = c->opts.energy_poll_s;
    so.power_poll_s = c->opts.power_poll_s;
    /* Profiling at locked clocks: the clock read back, for windows the power limit held below
     * theirs (resolve.c). */
    if (!c->opts.measure_only) so.clock_poll_s = PRS__CLIENT_CLOCK_POLL_S;
    int rc = prs__client_sampler_start(g, &so, &c->dev->sampler);
    if (rc)
        prs_error_set(err, rc, "client: cannot sample the GPU's energy or power: %s",
                      prs_gpu_errmsg(g));
    return rc;
}

/* Takes stream (closed on failure too). */
int prs__client_dev_open(prs_client *c, prs_stream *stream, prs_gpu *sampler_gpu, prs_error *err)
{
    prs__client_dev *d = calloc(1, sizeof *d);
    if (!d) {
        prs_stream_close(stream);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    d->round_bound_s = PRS__CLIENT_ROUND_BOUND_S;
    d->answer_wait_s = PRS__CLIENT_ANSWER_WAIT_S;
    c->dev = d;
    d->stream = stream;
    return start_sampler(c, sampler_gpu, err);
}

/* Report what is in flight (waiting for the device), then release everything. */
void prs__client_dev_close(prs_client *c)
{
    prs__client_dev *d = c->dev;
    if (!d) return;
    if (d->stream) {
        while (d->head)
            prs__client_dev_poll(c, 1);
        /* Host functions still queued point at our records: let the stream pass them. */
        prs_event *fin = prs__client_event_get(c);
        if (fin && prs_event_record(d->stream, fin) == 0) prs_event_wait(d->stream, fin);
        prs__client_event_put(c, fin);
    }
    prs__client_dev_pend_free(c, d->cur);
    if (d->sampler) prs__client_sampler_stop(d->sampler);
    for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++)
        prs__client_attrib_free(d->fits[i].fit);
    for (prs__client_hostcall *h = d->free_calls, *n; h; h = n) {
        n = h->next;
        free(h);
    }
    for (int i = 0; i < d->n_free_ev; i++)
        prs_event_free(d->stream, d->free_ev[i]);
    free(d->free_ev);
    if (d->stream) prs_stream_close(d->stream);
    free(d);
    c->dev = NULL;
}
