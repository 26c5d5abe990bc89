/* A trace replayed on a fixed cluster (fixed.h): one engine per instance, the trace's arrivals,
 * the instances' iteration ends and the instance level's ticks taken in time order. With few
 * instances (a live deployment's) the next event is found by a scan. */
#include "fixed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

typedef struct fixed_run {
    const prs_infer_fixed_cfg *cfg;
    prs_infer_fixed_result *out;
    prs_infer_engine *e[PRS_INFER_FIXED_MAX_INST];
    long kv_tokens[PRS_INFER_FIXED_MAX_INST];
    long prompt_seen[PRS_INFER_FIXED_MAX_INST]; /* prompt tokens at the last decision */
    double mhz_sum[PRS_INFER_FIXED_MAX_INST];
    long decisions;
} fixed_run;

static int check_cfg(const prs_infer_fixed_cfg *c, prs_error *err)
{
    if (c->n_inst < 1 || c->n_inst > PRS_INFER_FIXED_MAX_INST)
        return prs_error_set(err, PRS_EINVAL, "fixed cluster: %d instances (1 to %d)", c->n_inst,
                             PRS_INFER_FIXED_MAX_INST);
    if (!c->hooks.route) return prs_error_set(err, PRS_EINVAL, "fixed cluster: no routing rule");
    if (!(c->instance_period_s >= 0) || (c->instance_period_s > 0 && !c->hooks.clock))
        return prs_error_set(err, PRS_EINVAL,
                             "fixed cluster: instance period must be >= 0, with a clock rule");
    return PRS_OK;
}

static int start_engines(fixed_run *r, prs_error *err)
{
    const prs_infer_fixed_cfg *c = r->cfg;
    for (int i = 0; i < c->n_inst; i++) {
        prs_infer_engine_cfg ec = {.perf = c->perf[i],
                                   .tp = c->tp[i],
                                   .mhz = c->mhz[i],
                                   .max_batched_tokens = c->max_batched_tokens,
                                   .classes = &c->classes,
                                   .latency = &r->out->lat,
                                   .max_run_steps = c->run_steps};
        int mb, rc = c->perf[i]->capacity(c->perf[i]->ctx, c->tp[i], &r->kv_tokens[i], &mb, err);
        if (!rc) rc = prs_infer_engine_new(&ec, 0, &r->e[i], err);
        if (rc) return rc;
        r->out->mhz_min[i] = r->out->mhz_max[i] = c->mhz[i];
    }
    return PRS_OK;
}

/* Every instance's state at now_s; with the horizon of the next decision. */
static void sync_all(fixed_run *r, double now_s, double horizon_s)
{
    for (int i = 0; i < r->cfg->n_inst; i++) {
        prs_infer_engine_sync(r->e[i], now_s);
        prs_infer_engine_set_horizon(r->e[i], horizon_s);
    }
}

static int arrive(fixed_run *r, const prs_infer_req *q, uint32_t id, prs_error *err)
{
    const prs_infer_fixed_cfg *c = r->cfg;
    int inflight[PRS_INFER_FIXED_MAX_INST], rerouted = 0;
    for (int i = 0; i < c->n_inst; i++)
        inflight[i] = (int)prs_infer_engine_outstanding(r->e[i]);
    int klass = prs_infer_class_of(&c->classes, q->in_tokens, q->out_tokens);
    int i = c->hooks.route(c->hooks.ud, inflight, klass, q->in_tokens, q->out_tokens, &rerouted);
    if (i < 0 || i >= c->n_inst) {
        r->out->rejected++;
        return PRS_OK;
    }
    prs_infer_job job = {id, q->in_tokens, q->out_tokens, (uint8_t)klass, q->arrival_s};
    r->out->served[i]++;
    r->out->rerouted += rerouted;
    return prs_infer_engine_submit(r->e[i], &job, q->arrival_s, err);
}

/* The instance level at now_s: each instance's load to the clock rule, its answer applied. */
static int decide(fixed_run *r, double now_s, prs_error *err)
{
    const prs_infer_fixed_cfg *c = r->cfg;
    for (int i = 0; i < c->n_inst; i++) {
        int n;
        long ctx, prompts = prs_infer_engine_prompt_tokens(r->e[i]);
        prs_infer_engine_running(r->e[i], &n, &ctx);
        prs_infer_fixed_load load = {.running = n,
                                     .waiting = (double)(prs_infer_engine_outstanding(r->e[i]) - n),
                                     .kv_usage = fmin(1.0, (double)ctx / (double)r->kv_tokens[i]),
                                     .prompt_rate = (double)(prompts - r->prompt_seen[i]) /
                                                    c->instance_period_s};
        r->prompt_seen[i] = prompts;
        int mhz = prs_infer_engine_clock(r->e[i]);
        int rc = c->hooks.clock(c->hooks.ud, i, &load, &mhz, err);
        if (!rc && mhz != prs_infer_engine_clock(r->e[i])) {
            rc = prs_infer_engine_set_clock(r->e[i], mhz, now_s, err);
            r->out->clock_changes++;
        }
        if (rc) return rc;
        r->mhz_sum[i] += mhz;
        if (mhz < r->out->mhz_min[i]) r->out->mhz_min[i] = mhz;
        if (mhz > r->out->mhz_max[i]) r->out->mhz_max[i] = mhz;
    }
    r->decisions++;
    return PRS_OK;
}

/* The earliest instance event: its index (-1 when none is pending), its time in *t_s. */
static int next_instance(const fixed_run *r, double *t_s)
{
    int best = -1;
    *t_s = INFINITY;
    for (int i = 0; i < r->cfg->n_inst; i++) {
        double t = prs_infer_engine_next_s(r->e[i]);
        if (t < *t_s) *t_s = t, best = i;
    }
    return best;
}

static int busy(const fixed_run *r)
{
    for (int i = 0; i < r->cfg->n_inst; i++)
        if (prs_infer_engine_outstanding(r->e[i]) > 0) return 1;
    return 0;
}

/* The event loop; *end_s: the last event's time. */
static int run_events(fixed_run *r, const prs_infer_trace *trace, double *end_s, prs_error *err)
{
    double period = r->cfg->instance_period_s, tick = period > 0 ? 0 : INFINITY;
    size_t k = 0;
    int rc = PRS_OK;
    *end_s = 0;
    while (!rc) {
        double t_inst, t_arr = k < trace->n ? trace->reqs[k].arrival_s : INFINITY;
        int i = next_instance(r, &t_inst);
        if (k >= trace->n && !busy(r)) break; /* nothing left: no more decisions either */
        if (tick <= t_arr && tick <= t_inst) {
            sync_all(r, tick, tick + period);
            rc = decide(r, tick, err);
            tick += period;
        } else if (t_arr <= t_inst) {
            sync_all(r, t_arr, tick);
            rc = arrive(r, &trace->reqs[k], (uint32_t)k, err);
            *end_s = fmax(*end_s, t_arr);
            k++;
        } else if (i >= 0) {
            rc = prs_infer_engine_advance(r->e[i], err);
            *end_s = fmax(*end_s, t_inst);
        } else {
            break;
        }
    }
    return rc;
}

static void finish(fixed_run *r, double end_s)
{
    prs_infer_fixed_result *o = r->out;
    for (int i = 0; i < r->cfg->n_inst; i++) {
        prs_infer_engine_flush(r->e[i], end_s);
        o->energy_inst_j[i] = prs_infer_engine_energy_j(r->e[i]);
        o->energy_j += o->energy_inst_j[i];
        o->mhz_mean[i] = r->decisions ? r->mhz_sum[i] / (double)r->decisions : r->cfg->mhz[i];
    }
    o->duration_s = end_s;
    o->on_time = (long)(o->lat.done[PRS_INFER_ALL] - o->lat.late[PRS_INFER_ALL]);
}

int prs_infer_fixed_replay(const prs_infer_trace *trace, const prs_infer_fixed_cfg *cfg,
                           prs_infer_fixed_result *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_cfg(cfg, err);
    if (rc) return rc;
    fixed_run *r = calloc(1, sizeof *r);
    if (!r) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    r->cfg = cfg;
    r->out = out;
    out->requests = (long)trace->n;
    double end_s = 0;
    rc = start_engines(r, err);
    if (!rc) rc = run_events(r, trace, &end_s, err);
    if (!rc) finish(r, end_s);
    for (int i = 0; i < cfg->n_inst; i++)
        prs_infer_engine_free(r->e[i]);
    free(r);
    return rc;
}
