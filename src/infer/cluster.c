/* The cluster under replay (cluster.h, cluster_int.h): the options and policy names, the
 * instances with their GPU accounting, and the load forecasts the policies read. What a policy
 * does to the cluster goes through here (add, retire, set a clock); the replay that drives both
 * is replay.c. Instances taken out of service stop receiving requests, finish what they hold and
 * then give their GPUs back; until then their GPUs count. */
#include "cluster_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const policy_names[PRS_INFER_NPOLICY] = {
    "singlepool", "multipool", "instances", "tp", "clock", "dynamollm", "oracle", "phase"};

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
    o->phase_slack = 0.1;
    o->run_steps = 64;
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
    if (!(o->power_cap_w >= 0) || !isfinite(o->power_cap_w))
        return prs_error_set(err, PRS_EINVAL, "power cap must be >= 0 W (0: none)");
    if (!(o->phase_slack >= 0 && o->phase_slack <= 1))
        return prs_error_set(err, PRS_EINVAL, "phase slack must be in [0, 1]");
    if (o->run_steps < 1 || o->run_steps > 4096)
        return prs_error_set(err, PRS_EINVAL, "run steps must be in 1..4096");
    if (o->units_top < 1 || o->units_top > PRS_INFER_MAX_UNITS)
        return prs_error_set(err, PRS_EINVAL, "units per instance must be in 1..%d",
                             PRS_INFER_MAX_UNITS);
    return PRS_OK;
}

/* ---- GPUs and instances ---- */

void prs__infer_cluster_gpus(prs__infer_cluster *c, int delta)
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
                                .meter = &c->res->meter,
                                .max_run_steps = c->o->run_steps};
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
    prs_infer_engine_set_horizon(in->e, c->horizon_s);
    prs__infer_evheap_set(&c->events, c->n_inst, INFINITY);
    c->n_inst++;
    prs__infer_cluster_gpus(c, c->caps->tps[type]);
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

void prs__infer_cluster_reap(prs__infer_cluster *c)
{
    for (int i = 0; i < c->n_inst; i++) {
        prs__infer_inst *in = &c->inst[i];
        if (in->state != INST_DRAINING || prs_infer_engine_outstanding(in->e) > 0) continue;
        prs_infer_engine_flush(in->e, c->now_s);
        c->res->preemptions += prs_infer_engine_preemptions(in->e);
        c->res->cap_floor_iters += prs_infer_engine_over_limit(in->e);
        prs__infer_cluster_gpus(c, -c->caps->tps[in->type]);
        prs_infer_engine_free(in->e);
        c->inst[i] = c->inst[c->n_inst - 1];
        prs__infer_evheap_remove(&c->events, i);
        if (i != c->n_inst - 1) prs__infer_evheap_rename(&c->events, c->n_inst - 1, i);
        c->n_inst--;
        i--;
    }
}

/* ---- forecasts ---- */

int prs__infer_cluster_bins(prs__infer_cluster *c, const int8_t *pool_of, prs_error *err)
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

void prs__infer_cluster_free(prs__infer_cluster *c)
{
    for (int i = 0; i < c->n_inst; i++)
        prs_infer_engine_free(c->inst[i].e);
    free(c->inst);
    prs__infer_evheap_free(&c->events);
    free(c->bin_counts);
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        prs_infer_pool_table_free(&c->tables[p]);
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
