/* Ended iterations on a device stream, from events to reports (devtime.c enqueues them).
 *
 * In FIFO order, an iteration is resolved once its closing event completed: the anchor host
 * function gives the host time of its start event, and elapsed times between events give every
 * computation's start and end on the host clock, and the iteration's time and pace. Clock tags:
 * the clock in effect is followed through the clock host functions in stream order; a change the
 * controller refused leaves the previous clock in effect (and the tag says so).
 *
 * Profiling iterations feed their round's attribution (one fit per round: kind = local chunk * 2
 * + instruction; the time between computations is the blocked power's). The sampler's readings go
 * to every live fit (each keeps only those inside its own timeline) and to a short history used
 * for the energy of iterations outside profiling (the counter interpolated at the iteration's
 * start and end). An iteration is reported when its fit is usable (profiling) or the history
 * reaches past its end (otherwise); when forced it is reported with what there is: without
 * windows if the fit is not usable. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "perseus/clock.h"
#include "client_int.h"

#define DRAIN_BATCH 256
/* A round's fit is used once every fitted power's standard error is below this share of it. The
 * server averages the windows of several iterations and ranks, so each fit need not be final. */
#define FIT_MAX_REL_SE 0.05
#define FIT_KIND_REL_SE 0.01        /* energy counter rows */
#define FIT_KIND_REL_SE_POWER 0.006 /* power samples: less per reading, held to more */
/* Beyond this gap between an iteration's anchor and the previous iteration's end the anchor
 * wins (a skipped iteration, a clock step). */
#define CHAIN_DRIFT_S 1e-3
/* An iteration's end anchor that ran within this of its enqueueing found the stream empty (a
 * host function on an idle stream runs in tens of microseconds on an H100; one with work ahead
 * runs after it): the GPU had run dry before the host ended the iteration. */
#define DRAINED_S 1e-3

void prs__client_dev_push(prs_client *c, prs__client_pend *p)
{
    prs__client_dev *d = c->dev;
    p->next = NULL;
    if (d->tail)
        d->tail->next = p;
    else
        d->head = p;
    d->tail = p;
    d->n_pend++;
}

static prs__client_round_fit *fit_of(prs_client *c, long round)
{
    for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++)
        if (c->dev->fits[i].fit && c->dev->fits[i].round == round) return &c->dev->fits[i];
    return NULL;
}

/* A fit of n_kinds computation kinds and two more: other work (prs_client_other_begin), kind
 * n_kinds, and the tails of opts.other_after_last as lumps, kind TAIL_KIND (tail_is_other). 0, or
 * an error code. */
#define TAIL_KIND(n_kinds) ((n_kinds) + 1)
static int new_fit(int n_kinds, prs__client_attrib **out)
{
    prs__client_attrib_opts o;
    prs__client_attrib_opts_init(&o);
    o.max_rel_se = FIT_MAX_REL_SE;
    return prs__client_attrib_new(n_kinds + 2, &o, out);
}

/* Whether a solution has a power below zero by more than 3 standard errors: rows that contradict
 * the physics (spoiled by a starved host or sampler) rather than too few of them, whose noise
 * more rows average out. */
static int spoiled(const double *pw, double idle, const prs__client_attrib_quality *q, int n)
{
    for (int k = 0; k < n; k++)
        if (isfinite(pw[k]) && isfinite(q->kind_se_w[k]) && pw[k] + 3 * q->kind_se_w[k] < 0)
            return 1;
    return isfinite(idle) && isfinite(q->idle_se_w) && idle + 3 * q->idle_se_w < 0;
}

/* A round's fit that its round bound has passed and that is still rejected, as spoiled or for
 * another bound's length (poor_too_long), starts again from the iterations after now, rather
 * than hold the round's reports back for good. */
static void restart_fit(prs__client_round_fit *f, const char *why)
{
    prs__client_attrib *fresh;
    if (new_fit(f->n_kinds, &fresh)) return;
    prs__client_log("warn",
                    "msg=profiling_fit_restarted round=%ld restarts=%d after_s=%.1f why=\"%s\"",
                    f->round, f->restarts + 1, f->t_last - f->t_first, why);
    prs__client_attrib_free(f->fit);
    f->fit = fresh;
    f->fed = 0;
    f->t_first = f->t_last = f->poor_since = 0;
    f->restarts++;
}

/* The fit of a profiling round, created on first use (the oldest is dropped past the limit). */
static prs__client_round_fit *fit_for(prs_client *c, long round, int n_kinds)
{
    prs__client_round_fit *f = fit_of(c, round);
    if (f) return f;
    prs__client_dev *d = c->dev;
    int slot = 0;
    for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++) {
        if (!d->fits[i].fit) {
            slot = i;
            break;
        }
        if (d->fits[i].round < d->fits[slot].round) slot = i;
    }
    prs__client_attrib_free(d->fits[slot].fit);
    d->fits[slot].fit = NULL;
    if (new_fit(n_kinds, &d->fits[slot].fit)) return NULL;
    d->fits[slot].round = round;
    d->fits[slot].n_kinds = n_kinds;
    d->fits[slot].fed = 0;
    d->fits[slot].throttled = d->fits[slot].below = d->fits[slot].restarts = d->fits[slot].told = 0;
    d->fits[slot].t_first = d->fits[slot].t_last = d->fits[slot].poor_since = 0;
    return &d->fits[slot];
}

/* Drop the fits of rounds that no pending iteration and no future one can use. */
static void prune_fits(prs_client *c)
{
    prs__client_dev *d = c->dev;
    for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++) {
        if (!d->fits[i].fit || d->fits[i].round == c->cur.round) continue;
        int used = d->cur && d->cur->round == d->fits[i].round;
        for (prs__client_pend *p = d->head; p && !used; p = p->next)
            used = p->profiling && p->round == d->fits[i].round;
        if (!used) {
            prs__client_attrib_free(d->fits[i].fit);
            d->fits[i].fit = NULL;
        }
    }
}

static void history_add(prs__client_dev *d, double t, double e)
{
    int i = (d->hist_head + d->hist_len) % PRS__CLIENT_HISTORY;
    if (d->hist_len == PRS__CLIENT_HISTORY) {
        d->hist_head = (d->hist_head + 1) % PRS__CLIENT_HISTORY;
        d->hist_len--;
        i = (d->hist_head + d->hist_len) % PRS__CLIENT_HISTORY;
    }
    d->hist_t[i] = t;
    d->hist_e[i] = e;
    d->hist_len++;
}

/* Move the sampler's clock readings into their ring. */
static void drain_clocks(prs__client_dev *d)
{
    prs__client_clock_read buf[64];
    int n;
    while ((n = prs__client_sampler_drain_clocks(d->sampler, buf, 64)) > 0)
        for (int k = 0; k < n; k++) {
            if (d->clk_len == PRS__CLIENT_CLOCK_READS) {
                d->clk_head = (d->clk_head + 1) % PRS__CLIENT_CLOCK_READS;
                d->clk_len--;
            }
            int i = (d->clk_head + d->clk_len++) % PRS__CLIENT_CLOCK_READS;
            d->clk_t[i] = 0.5 * (buf[k].t_lo + buf[k].t_hi);
            d->clk_mhz[i] = buf[k].mhz;
            d->clk_end = d->clk_t[i];
        }
}

/* Move the sampler's readings into the fits and the history. */
static void drain(prs_client *c)
{
    prs__client_dev *d = c->dev;
    drain_clocks(d);
    prs__client_sample buf[DRAIN_BATCH];
    int power = prs__client_sampler_mode(d->sampler) == PRS__CLIENT_SAMPLE_POWER;
    for (;;) {
        int n = prs__client_sampler_drain(d->sampler, buf, DRAIN_BATCH);
        for (int k = 0; k < n; k++) {
            double lo = buf[k].t_lo, hi = buf[k].t_hi, v = buf[k].value;
            if (!power) prs__client_refresh_map(&d->refresh, &lo, &hi);
            double t = 0.5 * (lo + hi);
            for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++) {
                if (!d->fits[i].fit) continue;
                if (power)
                    prs__client_attrib_power(d->fits[i].fit, lo, hi, v);
                else
                    prs__client_attrib_energy(d->fits[i].fit, lo, hi, v);
            }
            if (power) {
                if (d->last_power_t > 0 && t > d->last_power_t)
                    d->power_energy += 0.5 * (v + d->last_power_w) * (t - d->last_power_t);
                d->last_power_t = t;
                d->last_power_w = v;
                history_add(d, t, d->power_energy);
            } else {
                history_add(d, t, v);
            }
        }
        if (n < DRAIN_BATCH) break;
    }
}

/* The counter at host time t, interpolated; NAN when the history does not bracket t. */
static double counter_at(const prs__client_dev *d, double t)
{
    for (int k = d->hist_len - 1; k > 0; k--) {
        int i1 = (d->hist_head + k) % PRS__CLIENT_HISTORY,
            i0 = (d->hist_head + k - 1) % PRS__CLIENT_HISTORY;
        if (d->hist_t[i0] <= t && t <= d->hist_t[i1]) {
            double span = d->hist_t[i1] - d->hist_t[i0];
            double w = span > 0 ? (t - d->hist_t[i0]) / span : 0;
            return d->hist_e[i0] + w * (d->hist_e[i1] - d->hist_e[i0]);
        }
    }
    return NAN;
}

static double history_end(const prs__client_dev *d)
{
    return d->hist_len ? d->hist_t[(d->hist_head + d->hist_len - 1) % PRS__CLIENT_HISTORY]
                       : -INFINITY;
}

/* Elapsed seconds between two completed events; NAN on failure. */
static double elapsed(prs_client *c, prs_event *a, prs_event *b)
{
    double s;
    return prs_event_elapsed_s(c->dev->stream, a, b, &s) == 0 ? s : NAN;
}

/* A computation that began this share of its duration or more before the answer to the change
 * of its clock arrived may have run that long at the previous clock (the daemon applies a change
 * some time after the stream passed it: a busy node, a stopped daemon): it gets no clock. Below,
 * the error is at most this share of one computation per change. */
#define LATE_CHANGE_SHARE 0.02

/* The clock in effect after h, when h ran (else what it was): what it set, as the controller
 * answered (-1 while no answer came), and from when (a new clock: the answer's arrival). */
static void follow(prs_client *c, const prs__client_hostcall *h)
{
    if (!h || !atomic_load_explicit(&h->done, memory_order_acquire)) return;
    int mhz = h->in_effect;
    double since = 0;
    if (h->request > 0 && prs_clockctl_answer_at(c->ctl, h->request, &mhz, &since) == 0) mhz = -1;
    if (mhz != c->dev->eff_mhz) c->dev->eff_since_s = isfinite(since) ? since : 0;
    c->dev->eff_mhz = mhz;
}

/* The clock op i of p ran at, as far as the stream and the answers tell (-1: not known). */
static int op_clock(const prs_client *c, const prs__client_pend *p, int i)
{
    const prs__client_dev *d = c->dev;
    int mhz = d->eff_mhz > 0 ? d->eff_mhz : d->eff_mhz == 0 ? prs__client_default_clock(c) : -1;
    double late = LATE_CHANGE_SHARE * (p->op_t1[i] - p->op_t0[i]);
    return mhz > 0 && d->eff_since_s > p->op_t0[i] + late ? -1 : mhz;
}

/* One of p's clock changes ran and its answer is still due. */
static int answer_due(const prs_client *c, const prs__client_hostcall *h)
{
    int mhz;
    return h && atomic_load_explicit(&h->done, memory_order_acquire) && h->request > 0 &&
           prs_clockctl_answer(c->ctl, h->request, &mhz) == 0;
}

/* Wait (answer_wait_s at most after p began) for the answers to p's clock changes, so that its
 * computations are tagged with the clocks they ran at. */
static int answers_due(const prs_client *c, const prs__client_pend *p)
{
    if (!c->ctl || prs_mono_s() > p->anchor->host_s + c->dev->answer_wait_s) return 0;
    for (const prs__client_hostcall *k = p->closing; k; k = k->next)
        if (answer_due(c, k)) return 1;
    for (int i = 0; i < p->n_ops; i++)
        if (answer_due(c, p->ops[i].change)) return 1;
    return 0;
}

/* Times and clock tags of a completed iteration. */
static int resolve_times(prs_client *c, prs__client_pend *p)
{
    prs__client_dev *d = c->dev;
    if (!atomic_load_explicit(&p->anchor->done, memory_order_acquire)) return PRS_EGPU;
    /* An iteration starts at the event that ended the one before: continue that timeline rather
     * than restart it from this anchor, which was noted a little before the event (the host
     * function runs first) and would overlap the previous iteration's end. The anchor corrects
     * the chain only when they drift apart. */
    double base = p->anchor->host_s;
    if (d->chain_end > 0 && fabs(base - d->chain_end) < CHAIN_DRIFT_S) base = d->chain_end;
    p->t_start = base;
    /* Measure only (no controller): every iteration has the clock read at its start. */
    if (!c->ctl || (d->eff_mhz < 0 && p->anchor->in_effect >= 0)) d->eff_mhz = p->anchor->in_effect;
    p->t_end = base + elapsed(c, p->start, p->end);
    d->chain_end = p->t_end;
    /* The stream reached the iteration's end about as soon as the host enqueued it: it had run
     * dry, and the GPU idled for some of the time since the last work the host gave it. */
    const prs__client_hostcall *e = p->end_anchor;
    p->drained = e && atomic_load_explicit(&e->done, memory_order_acquire) &&
                 e->host_s - e->enq_s < DRAINED_S;
    p->op_t0 = malloc(sizeof(double) * (size_t)(2 * p->n_ops + 1));
    p->op_clock = malloc(sizeof(int) * (size_t)(p->n_ops + 1));
    if (!p->op_t0 || !p->op_clock) return PRS_ENOMEM;
    p->op_t1 = p->op_t0 + p->n_ops;
    const prs__client_hostcall *k = p->closing; /* in stream order, among the computations */
    for (int i = 0; i < p->n_ops; i++) {
        prs__client_devop *o = &p->ops[i];
        for (; k && k->before_op <= i; k = k->next)
            follow(c, k);
        follow(c, o->change);
        p->op_t0[i] = base + elapsed(c, p->start, o->b);
        p->op_t1[i] = base + elapsed(c, p->start, o->e);
        p->op_clock[i] = op_clock(c, p, i);
    }
    for (; k; k = k->next)
        follow(c, k);
    p->resolved = isfinite(p->t_end);
    for (int i = 0; i < p->n_ops && p->resolved; i++)
        p->resolved = isfinite(p->op_t0[i]) && isfinite(p->op_t1[i]);
    return p->resolved ? 0 : PRS_EGPU;
}

static int n_kinds_of(const prs_client *c)
{
    if (c->opts.measure_only) return 2 * PRS_CLIENT_MAX_CHUNKS;
    int v = c->cur.has_pipe && c->cur.pipe.virtual_stages > 1 ? c->cur.pipe.virtual_stages : 1;
    return 2 * v;
}

/* An op's kind in its round's fit: chunk * 2 + instruction, other work n_kinds. */
static int kind_of(const prs__client_devop *o, int n_kinds)
{
    return o->other ? n_kinds : o->local_chunk * 2 + (int)o->instr;
}

/* opts.other_after_last: the time after p's last computation is other work (p has computations,
 * none left open, and no other-work window of its own). Such a tail holds a wait (for the
 * all-reduce, or for a late host) and then the work: one power for the whole tail is wrong when
 * the wait varies, and its error lands on the idle power of the time around it (+65 % in
 * test_devtime_e2e's real-trainer). Against an energy counter the tail is fitted as a lump: idle
 * over its span plus a fixed energy a tail (attrib.h); from power samples, which cannot see a
 * lump, as other work at one power, or left out where the host was late. */
static int tail_is_other(const prs_client *c, const prs__client_pend *p)
{
    if (!c->opts.other_after_last || p->n_ops == 0 || p->open_closed) return 0;
    for (int i = 0; i < p->n_ops; i++)
        if (p->ops[i].other) return 0;
    return 1;
}

/* Give a profiling iteration's timeline to its round's fit (once). */
static void feed(prs_client *c, prs__client_pend *p)
{
    if (!p->profiling) return;
    prs__client_round_fit *f = fit_for(c, p->round, n_kinds_of(c));
    if (!f) return;
    prs__client_attrib_known(f->fit, p->t_start);
    if (f->fed++ == 0) f->t_first = p->t_start;
    if (p->t_end > f->t_last) f->t_last = p->t_end;
    if (c->opts.measure_only && p->iteration < c->opts.warmup_iterations) {
        prs__client_attrib_unknown(f->fit, p->t_start, p->t_end); /* warm-up: not profiled */
        return;
    }
    double floor_t = p->t_start; /* rounding never makes intervals overlap or go back */
    for (int i = 0; i < p->n_ops; i++) {
        int kind = kind_of(&p->ops[i], f->n_kinds);
        double t0 = fmax(p->op_t0[i], floor_t), t1 = fmax(p->op_t1[i], t0);
        /* a window left open: from its begin on, the hooks tracked nothing */
        if (p->open_closed && i == p->n_ops - 1) {
            prs__client_attrib_unknown(f->fit, t0, p->t_end);
            break;
        }
        if (kind >= 0 && kind <= f->n_kinds) prs__client_attrib_busy(f->fit, kind, t0, t1);
        if (c->opts.measure_only && !p->ops[i].other)
            prs__client_local_count(c, kind, p->op_clock[i], t1 - t0);
        floor_t = t1;
    }
    /* a tail the GPU idled in for a while nobody knows is no sample of the other work's power */
    if (tail_is_other(c, p) && p->t_end > floor_t) {
        if (prs__client_sampler_mode(c->dev->sampler) != PRS__CLIENT_SAMPLE_POWER)
            prs__client_attrib_lump(f->fit, TAIL_KIND(f->n_kinds), floor_t, p->t_end);
        else if (p->drained)
            prs__client_attrib_unknown(f->fit, floor_t, p->t_end);
        else
            prs__client_attrib_busy(f->fit, f->n_kinds, floor_t, p->t_end);
    }
    prs__client_attrib_known(f->fit, p->t_end);
    if (c->opts.measure_only) prs__client_local_iteration(c);
}

/* Windows and energy of a profiling iteration from its round's fitted powers. */
static int fill_windows(prs_client *c, const prs__client_pend *p, const double *pw, double idle,
                        double lump_w, int n_kinds, prs__client_iteration *it)
{
    double busy_t = 0, busy_e = 0;
    int ok = 1;
    int n_comp = 0;
    for (int i = 0; i < p->n_ops; i++) {
        int kind = kind_of(&p->ops[i], n_kinds);
        double t = p->op_t1[i] - p->op_t0[i];
        n_comp += !p->ops[i].other;
        if (kind < 0 || kind > n_kinds || !isfinite(pw[kind])) {
            ok = ok && p->ops[i].other; /* other work's power is not reported */
            continue;
        }
        busy_t += t;
        busy_e += pw[kind] * t;
    }
    if (tail_is_other(c, p)) { /* its lump, the lumps' power or its own, else idle below */
        double tail_t = p->t_end - p->op_t1[p->n_ops - 1], lump = pw[TAIL_KIND(n_kinds)];
        double tail_e = isfinite(lump) && isfinite(idle) ? idle * tail_t + lump
                        : isfinite(lump_w)               ? lump_w * tail_t
                                                         : pw[n_kinds] * tail_t;
        if (isfinite(tail_e) && tail_t > 0) {
            busy_t += tail_t;
            busy_e += tail_e;
        }
    }
    double idle_t = it->time_s - busy_t;
    it->energy_j = busy_e + (isfinite(idle) && idle_t > 0 ? idle * idle_t : 0);
    it->blocking_power_w = isfinite(idle) && idle > 0 ? idle : 0;
    for (int i = 0; i < p->n_ops; i++)
        if (p->op_clock[i] < 0) ok = 0; /* a clock not known to be in effect: no windows */
    if (!ok || !p->phase_reportable || p->bad_order || n_comp == 0) return 1;
    it->windows = malloc(sizeof *it->windows * (size_t)n_comp);
    if (!it->windows) return 1;
    for (int i = 0; i < p->n_ops; i++) {
        const prs__client_devop *o = &p->ops[i];
        double t = p->op_t1[i] - p->op_t0[i];
        if (o->other) continue; /* measured, never reported as a computation */
        it->windows[it->n_windows++] = (prs__client_window){
            o->instr, o->microbatch, o->chunk, p->op_clock[i], t, pw[kind_of(o, n_kinds)] * t};
    }
    return 1;
}

/* The per-kind criterion: the largest standard error / power a computation's kind may have. */
double prs__client_dev_criterion(const prs_client *c)
{
    return prs__client_sampler_mode(c->dev->sampler) == PRS__CLIENT_SAMPLE_POWER
               ? FIT_KIND_REL_SE_POWER
               : FIT_KIND_REL_SE;
}

/* The largest standard error / power over the computations' kinds (NAN when one is not solved,
 * 0 when none ran). */
static double kinds_rel_se(const double *pw, const prs__client_attrib_quality *q, int n_kinds)
{
    double worst = 0;
    for (int k = 0; k < n_kinds; k++) {
        if (!isfinite(pw[k])) continue;
        double r = pw[k] > 0 ? q->kind_se_w[k] / pw[k] : NAN;
        if (!(r <= worst)) worst = r; /* NAN sticks */
        if (isnan(worst)) return NAN;
    }
    return worst;
}

/* The computations' powers (what the windows carry) are known to the criterion, or the round ran
 * past its bound with every kind solved (a solution exists: the windows carry its powers, the
 * report its relative standard error). */
static int kinds_settled(const prs_client *c, const prs__client_round_fit *f, const double *pw,
                         const prs__client_attrib_quality *q, double *rel_se)
{
    *rel_se = kinds_rel_se(pw, q, f->n_kinds);
    if (!isfinite(*rel_se)) return 0;
    if (*rel_se <= prs__client_dev_criterion(c)) return 1;
    return f->t_last - f->t_first >= c->dev->round_bound_s;
}

/* Whether a fit the attribution calls poor has to start again: past its round's bound, at once
 * when spoiled, else once it stayed poor for another bound's length (ill-conditioned, or a power
 * at or below zero within its noise, which more rows of the same kind may never lift). */
static int poor_too_long(const prs_client *c, prs__client_round_fit *f, int rc, int spoilt)
{
    double bound = c->dev->round_bound_s;
    if (rc != PRS__CLIENT_ATTRIB_POOR || f->t_last - f->t_first < bound) {
        f->poor_since = 0;
        return 0;
    }
    if (f->poor_since == 0) f->poor_since = f->t_last;
    return spoilt || f->t_last - f->poor_since >= bound;
}

/* The clock readings during p's computations that differ from the clock each is tagged with:
 * the number below it (the GPU held it back: its power limit), and in *above those above it (a
 * clock change that took effect late). Such a computation's time and energy are not the tag's. */
static int reads_off(const prs__client_dev *d, const prs__client_pend *p, int *above)
{
    int below = 0;
    *above = 0;
    for (int k = 0; k < d->clk_len; k++) {
        int j = (d->clk_head + k) % PRS__CLIENT_CLOCK_READS;
        if (d->clk_t[j] < p->t_start || d->clk_t[j] > p->t_end) continue;
        for (int i = 0; i < p->n_ops; i++)
            if (!p->ops[i].other && p->op_clock[i] > 0 && d->clk_mhz[j] != p->op_clock[i] &&
                p->op_t0[i] <= d->clk_t[j] && d->clk_t[j] <= p->op_t1[i]) {
                *(d->clk_mhz[j] < p->op_clock[i] ? &below : above) += 1;
                break;
            }
    }
    return below;
}

/* An iteration with a reading off its clock reports no windows, and a profiling round that ran
 * below its clock (PRS__CLIENT_THROTTLE_READS readings) none from then on (the fit's powers mix
 * the throttled computations in): p's computations lose their clock. Returns 0 to wait for the
 * clock read past p's end (while the sampler reads it, unless forced), else 1. */
static int check_clock(prs_client *c, prs__client_round_fit *f, prs__client_pend *p, int force)
{
    prs__client_dev *d = c->dev;
    if (!p->clock_checked) {
        if (!force && prs__client_sampler_clocks_on(d->sampler) && d->clk_end < p->t_end) return 0;
        int above, below = reads_off(d, p, &above);
        p->clock_checked = below + above > 0 ? 2 : 1;
        f->below += below;
        if (f->below >= PRS__CLIENT_THROTTLE_READS) f->throttled = 1;
    }
    if (!f->throttled && p->clock_checked < 2) return 1;
    int tagged = 0;
    for (int i = 0; i < p->n_ops; i++) {
        tagged |= p->op_clock[i] > 0;
        p->op_clock[i] = -1;
    }
    d->throttled += tagged; /* once (a report may be built again, waiting for the fit) */
    return 1;
}

/* Build the report of a resolved iteration. Returns 1 when it is ready (or forced), 0 to wait
 * for more readings, -1 when it is dropped (forced before its round's fit was usable). */
static int build_report(prs_client *c, prs__client_pend *p, int force, prs__client_iteration *it)
{
    memset(it, 0, sizeof *it);
    it->iteration = p->iteration;
    it->round = p->round;
    it->plan_id = p->profiling ? -1 : p->plan_id;
    it->time_s = p->t_end - p->t_start;
    int last = p->n_ops - 1; /* the pace ends with the last computation, not other work */
    while (last >= 0 && p->ops[last].other)
        last--;
    it->pace_s = last >= 0 ? p->op_t1[last] - p->t_start : 0;
    it->wall_s = p->wall_s;
    it->clock_mhz = p->n_ops > 0 && p->op_clock[0] > 0 ? p->op_clock[0]
                    : c->dev->eff_mhz > 0              ? c->dev->eff_mhz
                                                       : c->f_max_mhz;
    prs__client_round_fit *f = p->profiling ? fit_of(c, p->round) : NULL;
    if (f && c->opts.measure_only) return 1; /* measured whole: prs_client_measured */
    if (f && !check_clock(c, f, p, force)) return 0;
    if (f) {
        double pw[PRS__CLIENT_ATTRIB_MAX_KINDS], idle;
        prs__client_attrib_quality q;
        double rel_se = NAN;
        int rc = prs__client_attrib_solve(f->fit, pw, &idle, &q);
        int settled = rc >= 0 && kinds_settled(c, f, pw, &q, &rel_se);
        /* Past the bound a fit the attribution still calls short of its own limit is used too,
         * when every kind has a power. */
        if (rc == PRS__CLIENT_ATTRIB_MORE && settled && rel_se > prs__client_dev_criterion(c))
            rc = 0;
        if (rc == 0 && !settled) rc = PRS__CLIENT_ATTRIB_MORE;
        if (poor_too_long(c, f, rc, spoiled(pw, idle, &q, f->n_kinds + 1))) restart_fit(f, q.why);
        it->fit_rel_se = rel_se;
        it->fit_criterion = prs__client_dev_criterion(c);
        if (rc == 0) return fill_windows(c, p, pw, idle, q.lump_power_w, f->n_kinds, it);
        if (!f->told && f->t_last - f->t_first >= c->dev->round_bound_s) {
            f->told = 1;
            prs__client_log(
                "warn", "msg=profiling_fit_waiting round=%ld after_s=%.1f rel_se=%.4g why=\"%s\"",
                f->round, f->t_last - f->t_first, rel_se,
                q.why[0] ? q.why : "a kind's power not solved");
        }
        /* Its timeline is in the fit already: when the FIFO is full, the round goes on without
         * this iteration's report rather than with a report that lacks windows. */
        return force ? -1 : 0;
    }
    if (!force && history_end(c->dev) < p->t_end) return 0;
    it->energy_j = counter_at(c->dev, p->t_end) - counter_at(c->dev, p->t_start);
    return 1;
}

/* Resolve the oldest iteration's times when its events completed (or wait, when forced).
 * Returns 1 when resolved, 0 when not yet, -1 when it cannot be (dropped by the caller). */
static int complete(prs_client *c, prs__client_pend *p, int force)
{
    if (p->resolved) return 1;
    int q = prs_event_query(c->dev->stream, p->end);
    if (q == 0 && !force) return 0;
    if (q == 0) q = prs_event_wait(c->dev->stream, p->end) == 0;
    if (q > 0 && !force && answers_due(c, p)) return 0;
    if (q < 0 || resolve_times(c, p)) return -1;
    feed(c, p);
    return 1;
}

/* Resolve and feed every completed iteration (in order: the first incomplete one stops it), so
 * a round's fit grows while its oldest iteration waits to be reported. */
static void complete_all(prs_client *c)
{
    for (prs__client_pend *p = c->dev->head; p; p = p->next) {
        if (p->resolved || p->failed) continue;
        int st = complete(c, p, 0);
        if (st == 0) break;
        if (st < 0) p->failed = 1;
    }
}

int prs__client_dev_solve(prs_client *c, double *kind_power_w, double *idle_power_w,
                          prs__client_attrib_quality *q)
{
    prs__client_round_fit *f = fit_of(c, c->cur.round);
    if (!f) {
        memset(q, 0, sizeof *q);
        snprintf(q->why, sizeof q->why, "nothing measured yet");
        return PRS__CLIENT_ATTRIB_MORE;
    }
    return prs__client_attrib_solve(f->fit, kind_power_w, idle_power_w, q);
}

void prs__client_dev_poll(prs_client *c, int force)
{
    prs__client_dev *d = c->dev;
    drain(c);
    complete_all(c);
    drain(c);
    while (d->head) {
        prs__client_pend *p = d->head;
        int st = p->failed ? -1 : complete(c, p, force);
        if (st == 0) break;
        prs__client_iteration it;
        memset(&it, 0, sizeof it);
        int built = st > 0 ? build_report(c, p, force, &it) : 0;
        if (st > 0 && built == 0) break;
        int report = built > 0 && p->phase_reportable && it.time_s > 0 && isfinite(it.energy_j) &&
                     (!p->profiling || prs__client_take_quota(c, p->round));
        if (st < 0) atomic_fetch_add_explicit(&c->measure_failures, 1, memory_order_relaxed);
        prs__client_enqueue(c, &it, report);
        d->head = p->next;
        if (!d->head) d->tail = NULL;
        d->n_pend--;
        prs__client_dev_pend_free(c, p);
        force = 0;
    }
    prune_fits(c);
}
