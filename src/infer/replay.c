/* The cluster replay (cluster.h: prs_infer_replay): events in time order, routing, the policy's
 * ticks and emergencies.
 *
 * Time advances over three kinds of events: the trace's arrivals, the instances' iteration
 * ends, and the policy's ticks (every instance period). The next instance event comes from an
 * indexed heap (evheap.h): a large cluster holds hundreds of TP-2 instances. At equal times a tick
 * comes first, then arrivals, then iteration ends, so requests arriving together share a prefill.
 * The cluster's state and accounting are cluster.c's; the decisions, policy.c's. */
#include "cluster_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- routing ---- */

/* The pool a request goes to: its input class and its predicted output class. The predictor
 * errs on a (1 - accuracy) share of requests, chosen by a hash of the index, and then names one
 * of the two other output classes. */
static int8_t pool_for(const prs__infer_cluster *c, size_t i)
{
    if (c->fl.npools == 1) return 0;
    const prs_infer_req *q = &c->trace->reqs[i];
    int k = prs_infer_class_of(&c->o->classes, q->in_tokens, q->out_tokens);
    int in = k / 3, out = k % 3;
    uint64_t h = c->o->seed * 0x9E3779B97F4A7C15ULL + i;
    if (c->o->predictor_accuracy < 1 && prs__infer_unit(h) >= c->o->predictor_accuracy)
        out = (out + 1 + (prs__infer_unit(h ^ 0x5555555555555555ULL) < 0.5 ? 0 : 1)) % 3;
    return (int8_t)(in * 3 + out);
}

static int pick_in_pool(const prs__infer_cluster *c, int pool, const prs_infer_job *j, int state)
{
    int best = -1;
    double best_load = INFINITY;
    for (int i = 0; i < c->n_inst; i++) {
        const prs__infer_inst *in = &c->inst[i];
        if (in->pool != pool || in->state != state ||
            !prs_infer_engine_fits(in->e, j->in_tokens, j->out_tokens))
            continue;
        prs_infer_engine_sync(in->e, c->now_s);
        double load = (double)prs_infer_engine_outstanding_tokens(in->e) / c->caps->tps[in->type];
        if (load < best_load) {
            best_load = load;
            best = i;
        }
    }
    return best;
}

/* The pools larger than `pool` (input and output classes no smaller), nearest first. */
static int larger_pools(int pool, int *out)
{
    int n = 0;
    for (int d = 1; d <= 4; d++)
        for (int k = 0; k < PRS_INFER_NCLASS; k++) {
            int di = k / 3 - pool / 3, dout = k % 3 - pool % 3;
            if (di >= 0 && dout >= 0 && di + dout == d) out[n++] = k;
        }
    return n;
}

static int pick_larger(const prs__infer_cluster *c, int pool, const prs_infer_job *j)
{
    int larger[PRS_INFER_NCLASS];
    int n = larger_pools(pool, larger);
    for (int s = 0; s < n; s++) {
        int k = pick_in_pool(c, larger[s], j, INST_ACTIVE);
        if (k >= 0) return k;
    }
    return -1;
}

/* An instance for request j of pool `pool`, re-routing when the pool has none; -1 if no
 * instance anywhere can take it. */
static int route(prs__infer_cluster *c, int pool, const prs_infer_job *j)
{
    int k = pick_in_pool(c, pool, j, INST_ACTIVE);
    if (k >= 0) return k;
    if (c->fl.npools > 1 && (k = pick_larger(c, pool, j)) >= 0) {
        c->res->rerouted++;
        return k;
    }
    /* Nothing active that fits: any pool's, then an instance still starting. */
    for (int state = INST_ACTIVE; state <= INST_STARTING && k < 0; state++)
        for (int p = 0; p < c->fl.npools && k < 0; p++)
            k = pick_in_pool(c, p, j, state);
    if (k >= 0) c->res->rerouted++;
    return k;
}

/* SLO emergency on instance k: its queue's head has waited past emergency_share x its TTFT
 * SLO. The policy raises the clock; if it is already at the top, a request of a class with a
 * larger pool goes there instead when that instance waits less. */
static int emergency(prs__infer_cluster *c, int k, int pool, const prs_infer_job *j, prs_error *err)
{
    if (!c->o->emergencies || !(c->fl.knob_clock || c->fl.knob_tp || c->fl.knob_inst)) return k;
    double slo = c->o->classes.ttft_slo_s[j->in_tokens < c->o->classes.in_limit[0]   ? 0
                                          : j->in_tokens < c->o->classes.in_limit[1] ? 1
                                                                                     : 2];
    double wait = prs_infer_engine_head_wait_s(c->inst[k].e, c->now_s);
    if (wait <= c->o->emergency_share * slo) return k;
    c->res->emergencies++;
    int rc = prs__infer_policy_emergency(c, k, err);
    if (rc < 0) return rc;
    if (rc == 1 || c->fl.npools == 1) return k;
    int alt = pick_larger(c, pool, j);
    if (alt >= 0 && prs_infer_engine_head_wait_s(c->inst[alt].e, c->now_s) < wait) {
        c->res->rerouted++;
        return alt;
    }
    return k;
}

/* ---- the replay ---- */

static int advance_inst(prs__infer_cluster *c, int i, prs_error *err)
{
    prs__infer_inst *in = &c->inst[i];
    c->now_s = c->events.key[i];
    c->res->events++;
    int rc = prs_infer_engine_advance(in->e, err);
    prs__infer_evheap_set(&c->events, i, prs_infer_engine_next_s(in->e));
    if (!rc && in->state == INST_DRAINING && prs_infer_engine_outstanding(in->e) == 0)
        prs__infer_cluster_reap(c);
    return rc;
}

static int min_inst(const prs__infer_cluster *c)
{
    int i = prs__infer_evheap_top(&c->events);
    return i >= 0 && isfinite(c->events.key[i]) ? i : -1;
}

/* The configuration after a tick, into the result's log. */
static int log_config(prs__infer_cluster *c, double t_s, prs_error *err)
{
    prs_infer_config_log *g = &c->res->conf;
    if (g->n == g->cap) {
        size_t nc = g->cap ? 2 * g->cap : 256;
        double *t = realloc(g->t_s, nc * sizeof *t);
        if (t) g->t_s = t;
        int32_t *pg = t ? realloc(g->pool_gpus, nc * PRS_INFER_NCLASS * sizeof *pg) : NULL;
        if (pg) g->pool_gpus = pg;
        int32_t *ti = pg ? realloc(g->tp_insts, nc * PRS_INFER_MAX_TPS * sizeof *ti) : NULL;
        if (ti) g->tp_insts = ti;
        float *pm = ti ? realloc(g->pool_mhz, nc * PRS_INFER_NCLASS * sizeof *pm) : NULL;
        if (!pm) return prs_error_set(err, PRS_ENOMEM, "out of memory for the configuration log");
        g->pool_mhz = pm;
        g->cap = nc;
    }
    int32_t *pg = &g->pool_gpus[g->n * PRS_INFER_NCLASS],
            *ti = &g->tp_insts[g->n * PRS_INFER_MAX_TPS];
    float *pm = &g->pool_mhz[g->n * PRS_INFER_NCLASS];
    double mhz[PRS_INFER_NCLASS] = {0};
    memset(pg, 0, PRS_INFER_NCLASS * sizeof *pg);
    memset(ti, 0, PRS_INFER_MAX_TPS * sizeof *ti);
    for (int i = 0; i < c->n_inst; i++) {
        int gpus = c->caps->tps[c->inst[i].type];
        pg[c->inst[i].pool] += gpus;
        mhz[c->inst[i].pool] += (double)gpus * c->caps->clocks[c->inst[i].clock];
        ti[c->inst[i].type]++;
    }
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        pm[k] = pg[k] > 0 ? (float)(mhz[k] / pg[k]) : 0.0f;
    g->t_s[g->n++] = t_s;
    return PRS_OK;
}

static int do_tick(prs__infer_cluster *c, double t_s, prs_error *err)
{
    c->now_s = t_s;
    c->horizon_s = t_s + c->o->instance_period_s;
    for (int i = 0; i < c->n_inst; i++) {
        prs__infer_inst *in = &c->inst[i];
        prs_infer_engine_sync(in->e, t_s);
        if (in->state == INST_STARTING && in->ready_s <= t_s) in->state = INST_ACTIVE;
        if (in->retire_s > 0 && in->retire_s <= t_s) in->state = INST_DRAINING;
    }
    int rc = prs__infer_policy_tick(c, t_s, err);
    for (int i = 0; i < c->n_inst; i++) {
        prs_infer_engine_set_horizon(c->inst[i].e, c->horizon_s);
        prs__infer_evheap_set(&c->events, i, prs_infer_engine_next_s(c->inst[i].e));
    }
    prs__infer_cluster_reap(c);
    return rc ? rc : log_config(c, t_s, err);
}

/* Run events before time `until` (ticks up to and including it when ticking). */
static int run_until(prs__infer_cluster *c, double until, double *next_tick, int ticking,
                     prs_error *err)
{
    for (;;) {
        int i = min_inst(c);
        double te = i >= 0 ? c->events.key[i] : INFINITY;
        if (ticking && *next_tick <= until && *next_tick <= te) {
            int rc = do_tick(c, *next_tick, err);
            if (rc) return rc;
            *next_tick += c->o->instance_period_s;
            continue;
        }
        if (i < 0 || te >= until) return PRS_OK;
        int rc = advance_inst(c, i, err);
        if (rc) return rc;
    }
}

static int submit_one(prs__infer_cluster *c, size_t i, int pool, prs_error *err)
{
    const prs_infer_req *q = &c->trace->reqs[i];
    prs_infer_job j = {(uint32_t)i, q->in_tokens, q->out_tokens,
                       (uint8_t)prs_infer_class_of(&c->o->classes, q->in_tokens, q->out_tokens),
                       q->arrival_s};
    int k = route(c, pool, &j);
    if (k < 0)
        return prs_error_set(err, PRS_EINVAL,
                             "request %zu (%d + %d tokens) fits no instance of the cluster", i,
                             q->in_tokens, q->out_tokens);
    k = emergency(c, k, pool, &j, err);
    if (k < 0) return k;
    int rc = prs_infer_engine_submit(c->inst[k].e, &j, c->now_s, err);
    prs__infer_evheap_set(&c->events, k, prs_infer_engine_next_s(c->inst[k].e));
    c->res->requests++;
    return rc;
}

static int replay_loop(prs__infer_cluster *c, const int8_t *pool_of, prs_error *err)
{
    double next_tick = 0;
    int rc = PRS_OK;
    for (size_t i = 0; !rc && i < c->trace->n; i++) {
        double a = c->trace->reqs[i].arrival_s;
        rc = run_until(c, a, &next_tick, 1, err);
        c->now_s = a;
        if (!rc) rc = submit_one(c, i, pool_of[i], err);
    }
    /* Drain: no more decisions, every instance runs out its work. */
    c->horizon_s = INFINITY;
    for (int i = 0; !rc && i < c->n_inst; i++)
        prs_infer_engine_set_horizon(c->inst[i].e, INFINITY);
    if (!rc) rc = run_until(c, INFINITY, &next_tick, 0, err);
    return rc;
}

static void finish(prs__infer_cluster *c)
{
    double end = c->now_s;
    for (int i = 0; i < c->n_inst; i++) {
        prs_infer_engine_flush(c->inst[i].e, end);
        c->res->preemptions += prs_infer_engine_preemptions(c->inst[i].e);
        c->res->cap_floor_iters += prs_infer_engine_over_limit(c->inst[i].e);
    }
    prs__infer_cluster_gpus(c, 0);
    prs_infer_result *r = c->res;
    r->duration_s = end;
    r->gpu_hours = c->gpu_s / 3600;
    r->energy_j = r->meter.total_j;
    r->power_p50_w = prs__infer_meter_power_quantile(&r->meter, end, 0.5);
    r->power_p99_w = prs__infer_meter_power_quantile(&r->meter, end, 0.99);
    prs__infer_powercap_account(c, end);
}

int prs_infer_replay(const prs_infer_trace *trace, const prs_infer_perf *perf,
                     const prs_infer_captable *caps, const prs_infer_opts *o, prs_infer_policy p,
                     prs_infer_result *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    out->policy = p;
    int rc = prs_infer_opts_check(o, err);
    if (rc) return rc;
    if (p < 0 || p >= PRS_INFER_NPOLICY) return prs_error_set(err, PRS_EINVAL, "unknown policy");
    if (trace->n == 0) return prs_error_set(err, PRS_EINVAL, "empty trace");
    if (trace->n > UINT32_MAX) return prs_error_set(err, PRS_ERANGE, "trace too long");
    prs__infer_cluster c = {.trace = trace, .perf = perf, .caps = caps, .o = o, .res = out};
    prs__infer_policy_flags(p, o, &c.fl);
    out->conf.n_tps = caps->n_tps;
    out->conf.npools = c.fl.npools;
    memcpy(out->conf.tps, caps->tps, sizeof out->conf.tps);
    double horizon = trace->reqs[trace->n - 1].arrival_s + 3600;
    int8_t *pool_of = calloc(trace->n, 1);
    if (!pool_of) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    rc = prs__infer_meter_init(&out->meter, o->power_bin_s, horizon, err);
    for (size_t i = 0; !rc && i < trace->n; i++)
        pool_of[i] = pool_for(&c, i);
    if (!rc) rc = prs__infer_cluster_bins(&c, pool_of, err);
    if (!rc) rc = prs__infer_policy_init(&c, err);
    if (!rc) rc = replay_loop(&c, pool_of, err);
    if (!rc) finish(&c);
    free(pool_of);
    prs__infer_cluster_free(&c);
    if (rc) prs_infer_result_free(out);
    return rc;
}

void prs_infer_result_free(prs_infer_result *r)
{
    prs__infer_meter_free(&r->meter);
    free(r->conf.t_s);
    free(r->conf.pool_gpus);
    free(r->conf.tp_insts);
    free(r->conf.pool_mhz);
    memset(&r->conf, 0, sizeof r->conf);
}
