/* The cluster replay (cluster.h): events in time order, routing, GPU and energy accounting.
 *
 * Time advances over three kinds of events: the trace's arrivals, the instances' iteration
 * ends, and the policy's ticks (every instance period). The next instance event comes from an
 * indexed heap (evheap.h): a large cluster holds hundreds of TP-2 instances. At equal times a tick
 * comes first, then arrivals, then iteration ends, so requests arriving together share a prefill.
 * Instances taken out of service stop receiving requests, finish what they hold and then give
 * their GPUs back; until then their GPUs count. */
#include "cluster_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const policy_names[PRS_INFER_NPOLICY] = {
    "singlepool", "multipool", "instances", "tp", "clock", "dynamollm", "oracle"};

const char *prs_infer_policy_name(prs_infer_policy p)
{
    return p >= 0 && p < PRS_INFER_NPOLICY ? policy_names[p] : "?";
}

int prs_infer_policy_parse(const char *name, prs_infer_policy *out)
{
    for (int p = 0; p < PRS_INFER_NPOLICY; p++)
        if (strcmp(name, policy_names[p]) == 0) {
            *out = (prs_infer_policy)p;
            return PRS_OK;
        }
    return PRS_EINVAL;
}

void prs_infer_opts_default(prs_infer_opts *o)
{
    memset(o, 0, sizeof *o);
    prs_infer_classes_default(&o->classes);
    o->max_batched_tokens = 8192;
    o->gpus = 96;
    o->cluster_period_s = 1800;
    o->pool_period_s = 300;
    o->instance_period_s = 5;
    o->peak_window_s = 60;
    o->headroom = 1.0;
    o->max_util = 0.8;
    o->predictor_accuracy = 1.0;
    o->start_s = 30;
    o->reshard_s = 5;
    o->clock_s = 0.01;
    o->emergencies = 1;
    o->emergency_share = 0.5;
    o->power_bin_s = 1;
    o->units_top = 24;
    o->seed = 1;
}

int prs_infer_opts_check(const prs_infer_opts *o, prs_error *err)
{
    int rc = prs_infer_classes_check(&o->classes, err);
    if (rc) return rc;
    if (o->gpus < 1 || o->gpus > 100000)
        return prs_error_set(err, PRS_EINVAL, "gpus must be in 1..100000 (got %d)", o->gpus);
    if (o->max_batched_tokens < 1)
        return prs_error_set(err, PRS_EINVAL, "max batched tokens must be >= 1");
    if (!(o->instance_period_s > 0) || !(o->pool_period_s >= o->instance_period_s) ||
        !(o->cluster_period_s >= o->pool_period_s))
        return prs_error_set(err, PRS_EINVAL,
                             "periods must be 0 < instance <= pool <= cluster (got %g, %g, %g)",
                             o->instance_period_s, o->pool_period_s, o->cluster_period_s);
    if (!(o->peak_window_s >= o->instance_period_s))
        return prs_error_set(err, PRS_EINVAL, "peak window must be >= the instance period");
    if (!(o->headroom >= 1) || o->headroom > 10)
        return prs_error_set(err, PRS_EINVAL, "headroom must be in [1, 10]");
    if (!(o->max_util > 0 && o->max_util <= 1))
        return prs_error_set(err, PRS_EINVAL, "max utilisation must be in (0, 1]");
    if (!(o->predictor_accuracy >= 0 && o->predictor_accuracy <= 1))
        return prs_error_set(err, PRS_EINVAL, "predictor accuracy must be in [0, 1]");
    if (!(o->start_s >= 0) || !(o->reshard_s >= 0) || !(o->clock_s >= 0))
        return prs_error_set(err, PRS_EINVAL, "reconfiguration times must be >= 0");
    if (!(o->emergency_share > 0))
        return prs_error_set(err, PRS_EINVAL, "emergency share must be > 0");
    if (!(o->power_bin_s > 0)) return prs_error_set(err, PRS_EINVAL, "power bin must be > 0");
    if (o->units_top < 1 || o->units_top > PRS_INFER_MAX_UNITS)
        return prs_error_set(err, PRS_EINVAL, "units per instance must be in 1..%d",
                             PRS_INFER_MAX_UNITS);
    return PRS_OK;
}

/* ---- GPUs and instances ---- */

static void gpus_change(prs__infer_cluster *c, int delta)
{
    c->gpu_s += (double)c->gpus_now * (c->now_s - c->gpu_since_s);
    c->gpu_since_s = c->now_s;
    c->gpus_now += delta;
    if (c->gpus_now > c->res->peak_gpus) c->res->peak_gpus = c->gpus_now;
}

int prs__infer_cluster_add(prs__infer_cluster *c, int pool, int type, int clock, double ready_s,
                           prs_error *err)
{
    if (c->n_inst == c->cap_inst) {
        int nc = c->cap_inst ? 2 * c->cap_inst : 16;
        prs__infer_inst *p = realloc(c->inst, (size_t)nc * sizeof *p);
        if (!p) return prs_error_set(err, PRS_ENOMEM, "out of memory");
        c->inst = p;
        if (prs__infer_evheap_reserve(&c->events, nc))
            return prs_error_set(err, PRS_ENOMEM, "out of memory");
        c->cap_inst = nc;
    }
    prs_infer_engine_cfg cfg = {.perf = c->perf,
                                .tp = c->caps->tps[type],
                                .mhz = c->caps->clocks[clock],
                                .max_batched_tokens = c->o->max_batched_tokens,
                                .classes = &c->o->classes,
                                .latency = &c->res->lat,
                                .meter = &c->res->meter};
    prs__infer_inst *in = &c->inst[c->n_inst];
    memset(in, 0, sizeof *in);
    int rc = prs_infer_engine_new(&cfg, c->now_s, &in->e, err);
    if (rc) return rc;
    in->pool = pool;
    in->type = type;
    in->clock = clock;
    in->ready_s = ready_s;
    in->state = ready_s > c->now_s ? INST_STARTING : INST_ACTIVE;
    if (ready_s > c->now_s) prs_infer_engine_pause(in->e, ready_s);
    prs__infer_evheap_set(&c->events, c->n_inst, INFINITY);
    c->n_inst++;
    gpus_change(c, c->caps->tps[type]);
    return PRS_OK;
}

void prs__infer_cluster_retire(prs__infer_cluster *c, int i, double retire_s)
{
    c->inst[i].retire_s = retire_s > c->now_s ? retire_s : c->now_s;
    if (retire_s <= c->now_s) c->inst[i].state = INST_DRAINING;
}

int prs__infer_cluster_set_clock(prs__infer_cluster *c, int i, int clock, prs_error *err)
{
    prs__infer_inst *in = &c->inst[i];
    if (in->clock == clock) return PRS_OK;
    int rc = prs_infer_engine_set_clock(in->e, c->caps->clocks[clock], c->now_s, err);
    if (rc) return rc;
    in->clock = clock;
    if (!c->fl.free_reconf && c->o->clock_s > 0)
        prs_infer_engine_pause(in->e, c->now_s + c->o->clock_s);
    prs__infer_evheap_set(&c->events, i, prs_infer_engine_next_s(in->e));
    c->res->reconf[PRS_INFER_RECONF_CLOCK]++;
    return PRS_OK;
}

/* Give back the GPUs of drained instances that hold nothing more. */
static void reap(prs__infer_cluster *c)
{
    for (int i = 0; i < c->n_inst; i++) {
        prs__infer_inst *in = &c->inst[i];
        if (in->state != INST_DRAINING || prs_infer_engine_outstanding(in->e) > 0) continue;
        prs_infer_engine_flush(in->e, c->now_s);
        c->res->preemptions += prs_infer_engine_preemptions(in->e);
        gpus_change(c, -c->caps->tps[in->type]);
        prs_infer_engine_free(in->e);
        c->inst[i] = c->inst[c->n_inst - 1];
        prs__infer_evheap_remove(&c->events, i);
        if (i != c->n_inst - 1) prs__infer_evheap_rename(&c->events, c->n_inst - 1, i);
        c->n_inst--;
        i--;
    }
}

/* ---- forecasts ---- */

static int bins_build(prs__infer_cluster *c, const int8_t *pool_of, prs_error *err)
{
    const prs_infer_trace *t = c->trace;
    double end = t->n ? t->reqs[t->n - 1].arrival_s : 0;
    c->n_bins = (size_t)(end / c->o->instance_period_s) + 1;
    c->bin_counts = calloc(c->n_bins * (size_t)c->fl.npools, sizeof *c->bin_counts);
    if (!c->bin_counts) return prs_error_set(err, PRS_ENOMEM, "out of memory for load bins");
    for (size_t i = 0; i < t->n; i++) {
        size_t b = (size_t)(t->reqs[i].arrival_s / c->o->instance_period_s);
        if (b >= c->n_bins) b = c->n_bins - 1;
        c->bin_counts[b * (size_t)c->fl.npools + (size_t)pool_of[i]]++;
    }
    return PRS_OK;
}

static double bin_sum(const prs__infer_cluster *c, int pool, long b0, long b1)
{
    double s = 0;
    if (b0 < 0) b0 = 0;
    for (long b = b0; b < b1 && b < (long)c->n_bins; b++)
        s += c->bin_counts[(size_t)b * (size_t)c->fl.npools + (size_t)pool];
    return s;
}

double prs__infer_pool_peak(const prs__infer_cluster *c, int pool, double from_s, double to_s)
{
    long per = (long)llround(c->o->peak_window_s / c->o->instance_period_s);
    long b0 = (long)floor(from_s / c->o->instance_period_s + 1e-9);
    double end = ceil(to_s / c->o->instance_period_s - 1e-9);
    long b1 = end > (double)c->n_bins ? (long)c->n_bins : (long)end;
    double best = 0;
    for (long b = b0; b < b1; b += per) {
        long e = b + per < b1 ? b + per : b1;
        double r = bin_sum(c, pool, b, e) / ((double)(e - b) * c->o->instance_period_s);
        if (r > best) best = r;
    }
    return best;
}

double prs__infer_pool_bin_peak(const prs__infer_cluster *c, int pool, double from_s, double to_s)
{
    long b0 = (long)floor(from_s / c->o->instance_period_s + 1e-9);
    double end = ceil(to_s / c->o->instance_period_s - 1e-9);
    long b1 = end > (double)c->n_bins ? (long)c->n_bins : (long)end;
    double best = 0;
    for (long b = b0 < 0 ? 0 : b0; b < b1; b++)
        best = fmax(best, bin_sum(c, pool, b, b + 1) / c->o->instance_period_s);
    return best;
}

double prs__infer_pool_rate(const prs__infer_cluster *c, int pool, double from_s, double to_s)
{
    long b0 = (long)floor(from_s / c->o->instance_period_s + 1e-9);
    double end = ceil(to_s / c->o->instance_period_s - 1e-9);
    long b1 = end > (double)c->n_bins ? (long)c->n_bins : (long)end;
    if (b1 <= b0) return 0;
    return bin_sum(c, pool, b0, b1) / ((double)(b1 - b0) * c->o->instance_period_s);
}

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
    int rc = prs_infer_engine_advance(in->e, err);
    prs__infer_evheap_set(&c->events, i, prs_infer_engine_next_s(in->e));
    if (!rc && in->state == INST_DRAINING && prs_infer_engine_outstanding(in->e) == 0) reap(c);
    return rc;
}

static int min_inst(const prs__infer_cluster *c)
{
    int i = prs__infer_evheap_top(&c->events);
    return i >= 0 && isfinite(c->events.key[i]) ? i : -1;
}

static int do_tick(prs__infer_cluster *c, double t_s, prs_error *err)
{
    c->now_s = t_s;
    for (int i = 0; i < c->n_inst; i++) {
        prs__infer_inst *in = &c->inst[i];
        if (in->state == INST_STARTING && in->ready_s <= t_s) in->state = INST_ACTIVE;
        if (in->retire_s > 0 && in->retire_s <= t_s) in->state = INST_DRAINING;
    }
    int rc = prs__infer_policy_tick(c, t_s, err);
    for (int i = 0; i < c->n_inst; i++)
        prs__infer_evheap_set(&c->events, i, prs_infer_engine_next_s(c->inst[i].e));
    reap(c);
    return rc;
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
    if (!rc) rc = run_until(c, INFINITY, &next_tick, 0, err);
    return rc;
}

static void finish(prs__infer_cluster *c)
{
    double end = c->now_s;
    for (int i = 0; i < c->n_inst; i++) {
        prs_infer_engine_flush(c->inst[i].e, end);
        c->res->preemptions += prs_infer_engine_preemptions(c->inst[i].e);
    }
    gpus_change(c, 0);
    prs_infer_result *r = c->res;
    r->duration_s = end;
    r->gpu_hours = c->gpu_s / 3600;
    r->energy_j = r->meter.total_j;
    r->power_p50_w = prs__infer_meter_power_quantile(&r->meter, end, 0.5);
    r->power_p99_w = prs__infer_meter_power_quantile(&r->meter, end, 0.99);
}

static void cluster_free(prs__infer_cluster *c)
{
    for (int i = 0; i < c->n_inst; i++)
        prs_infer_engine_free(c->inst[i].e);
    free(c->inst);
    prs__infer_evheap_free(&c->events);
    free(c->bin_counts);
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        prs_infer_pool_table_free(&c->tables[p]);
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
    double horizon = trace->reqs[trace->n - 1].arrival_s + 3600;
    int8_t *pool_of = calloc(trace->n, 1);
    if (!pool_of) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    rc = prs__infer_meter_init(&out->meter, o->power_bin_s, horizon, err);
    for (size_t i = 0; !rc && i < trace->n; i++)
        pool_of[i] = pool_for(&c, i);
    if (!rc) rc = bins_build(&c, pool_of, err);
    if (!rc) rc = prs__infer_policy_init(&c, err);
    if (!rc) rc = replay_loop(&c, pool_of, err);
    if (!rc) finish(&c);
    free(pool_of);
    cluster_free(&c);
    if (rc) prs_infer_result_free(out);
    return rc;
}

void prs_infer_result_free(prs_infer_result *r)
{
    prs__infer_meter_free(&r->meter);
}

int prs_infer_scale_for_share(const prs_infer_trace *trace, const prs_infer_captable *caps,
                              const prs_infer_opts *o, double share, double *factor, prs_error *err)
{
    if (!(share > 0 && share <= 1))
        return prs_error_set(err, PRS_EINVAL, "peak share must be in (0, 1] (got %g)", share);
    int a = caps->n_tps - 1, f = caps->n_clocks - 1;
    double cap = caps->cap[PRS_INFER_NCLASS][a][f].rate_rps;
    double peak = prs_infer_trace_peak_rate(trace, o->peak_window_s);
    if (!(cap > 0) || !(peak > 0))
        return prs_error_set(err, PRS_EINVAL,
                             "singlepool (TP %d, %d MHz) cannot meet the SLOs at any load",
                             caps->tps[a], caps->clocks[f]);
    /* Instances needed at the peak: peak * factor / cap = share * gpus / tp. */
    *factor = share * o->gpus / caps->tps[a] * cap * o->max_util / peak;
    return PRS_OK;
}
