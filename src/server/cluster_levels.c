/* A cluster's periodic levels (cluster.h, online.h) as perseusd shows and keeps them: the view
 * (when each level last acted, why, what came of it, with a skipped change's saving and cost),
 * the decision counters, and the state the store keeps with the latest load so that a restart
 * goes on where it stopped (the windows of the longest period, the plan in force, the periods the
 * levels last acted in, the latest actions and the counters). */
#include <math.h>
#include <string.h>

#include "cluster.h"
#include "jsonfield.h"

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *act_json(const prs_infer_online_act *a)
{
    if (a->reason == PRS_INFER_ACT_NONE) return json_null();
    json_t *o = json_pack("{s:f, s:s, s:s}", "at_unix", a->t_s, "reason",
                          prs_infer_online_reason_name(a->reason), "outcome",
                          prs_infer_online_outcome_name(a->outcome));
    if (o && (a->saving_j != 0 || a->cost_j != 0)) {
        json_object_set_new(o, "saving_j", num(a->saving_j));
        json_object_set_new(o, "cost_j", num(a->cost_j));
    }
    return o;
}

json_t *cluster_levels_view(const cluster *c)
{
    if (!c->levels)
        return json_pack("{s:s}", "mode",
                         c->spec.cluster_period_s > 0 ? "periodic (no profile)" : "every_report");
    const prs_infer_online *s = c->levels;
    json_t *dec = json_object(), *rec = json_object();
    for (int k = 0; k < PRS_INFER_NDEC; k++)
        json_object_set_new(dec, prs_infer_online_decision_name(k), json_integer(s->decisions[k]));
    json_object_set_new(rec, "start", json_integer(s->reconf[PRS_INFER_RECONF_START]));
    json_object_set_new(rec, "reshard", json_integer(s->reconf[PRS_INFER_RECONF_RESHARD]));
    json_object_set_new(rec, "stop", json_integer(s->reconf[PRS_INFER_RECONF_STOP]));
    json_object_set_new(rec, "skipped", json_integer(s->reconf[PRS_INFER_RECONF_SKIPPED]));
    return json_pack("{s:s, s:f, s:f, s:f, s:o, s:o, s:o, s:o}", "mode", "periodic",
                     "cluster_period_s", c->spec.cluster_period_s, "pool_period_s",
                     c->spec.pool_period_s, "peak_window_s", c->spec.peak_window_s, "cluster",
                     act_json(&s->cluster_act), "pool", act_json(&s->pool_act), "decisions", dec,
                     "reconfigurations", rec);
}

json_t *cluster_levels_pool_view(const cluster *c, int pool)
{
    if (!c->levels) return NULL;
    if (!c->levels->started) return NULL;
    json_t *o = json_object();
    double peak[PRS_INFER_NCLASS];
    prs_infer_online_peaks(c->levels, c->opts.pool_period_s, peak);
    json_object_set_new(o, "last", act_json(&c->levels->pool[pool]));
    json_object_set_new(o, "budget_gpus", json_integer(c->levels->budget[pool]));
    json_object_set_new(o, "forecast_rps", json_real(peak[pool]));
    return o;
}

void cluster_levels_metrics(FILE *f, const cluster *c)
{
    if (!c->levels) return;
    for (int k = 0; k < PRS_INFER_NDEC; k++)
        fprintf(f, "perseus_cluster_level_decisions_total{cluster=\"%s\",kind=\"%s\"} %ld\n", c->id,
                prs_infer_online_decision_name(k), c->levels->decisions[k]);
}

/* --- the stored state --- */

static json_t *ints(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *act_save(const prs_infer_online_act *a)
{
    return json_pack("[f, i, i, o, o]", a->t_s, a->reason, a->outcome, num(a->saving_j),
                     num(a->cost_j));
}

json_t *cluster_levels_save(const cluster *c)
{
    const prs_infer_online *s = c->levels;
    if (!s || !s->started) return NULL;
    json_t *win = json_array(), *pools = json_array(), *dec = json_array(), *rec = json_array();
    /* The windows a forecast may still read: the longest period's and one more. */
    long newest = 0;
    for (int i = 0; i < PRS_INFER_ONLINE_WINDOWS; i++)
        if (s->win[i].index > newest) newest = s->win[i].index;
    long keep = (long)ceil(c->opts.cluster_period_s / c->opts.peak_window_s) + 2;
    for (int i = 0; i < PRS_INFER_ONLINE_WINDOWS; i++) {
        const prs_infer_online_window *w = &s->win[i];
        if (w->index < 0 || w->index < newest - keep || w->n == 0) continue;
        json_t *sum = json_array();
        for (int p = 0; p < PRS_INFER_NCLASS; p++)
            json_array_append_new(sum, json_real(w->sum_rps[p]));
        json_array_append_new(win, json_pack("[I, i, o]", (json_int_t)w->index, w->n, sum));
    }
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        json_array_append_new(pools, act_save(&s->pool[p]));
    for (int k = 0; k < PRS_INFER_NDEC; k++)
        json_array_append_new(dec, json_integer(s->decisions[k]));
    for (int k = 0; k < PRS_INFER_NRECONF; k++)
        json_array_append_new(rec, json_integer(s->reconf[k]));
    return json_pack("{s:f, s:f, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "t0",
                     s->t0_s, "last", s->last_s, "cluster_slot", (json_int_t)s->cluster_slot,
                     "pool_slot", (json_int_t)s->pool_slot, "budget",
                     ints(s->budget, PRS_INFER_NCLASS), "g", ints(s->g, PRS_INFER_NCLASS), "k",
                     ints(s->k, PRS_INFER_NCLASS), "windows", win, "cluster_act",
                     act_save(&s->cluster_act), "pool_act", act_save(&s->pool_act), "pools", pools,
                     "decisions", dec, "reconf", rec);
}

static int get_ints(json_t *a, int *v, int n, int hi)
{
    if (!json_is_array(a) || json_array_size(a) != (size_t)n) return -1;
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > hi)
            return -1;
        v[i] = (int)json_integer_value(x);
    }
    return 0;
}

static double real_or(json_t *x, double dflt)
{
    return json_is_number(x) ? json_number_value(x) : dflt;
}

static int act_load(json_t *a, prs_infer_online_act *out)
{
    if (!json_is_array(a) || json_array_size(a) != 5) return -1;
    out->t_s = real_or(json_array_get(a, 0), 0);
    out->reason = (int)json_integer_value(json_array_get(a, 1));
    out->outcome = (int)json_integer_value(json_array_get(a, 2));
    out->saving_j = real_or(json_array_get(a, 3), INFINITY);
    out->cost_j = real_or(json_array_get(a, 4), 0);
    return out->reason < 0 || out->reason > PRS_INFER_ACT_EMERGENCY || out->outcome < 0 ||
                   out->outcome > PRS_INFER_OUT_SKIPPED
               ? -1
               : 0;
}

static int windows_load(prs_infer_online *s, json_t *a)
{
    if (!json_is_array(a)) return -1;
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *w = json_array_get(a, i), *sum = json_array_get(w, 2);
        json_int_t idx = json_integer_value(json_array_get(w, 0));
        json_int_t n = json_integer_value(json_array_get(w, 1));
        if (!json_is_array(sum) || json_array_size(sum) != PRS_INFER_NCLASS || idx < 0 || n < 1 ||
            n > 1000000000)
            return -1;
        prs_infer_online_window *to = &s->win[idx % PRS_INFER_ONLINE_WINDOWS];
        to->index = (long)idx;
        to->n = (int)n;
        for (int p = 0; p < PRS_INFER_NCLASS; p++)
            to->sum_rps[p] = real_or(json_array_get(sum, (size_t)p), 0);
    }
    return 0;
}

static int longs_load(json_t *a, long *v, int n)
{
    if (!json_is_array(a) || json_array_size(a) != (size_t)n) return -1;
    for (int i = 0; i < n; i++)
        v[i] = (long)json_integer_value(json_array_get(a, (size_t)i));
    return 0;
}

int cluster_levels_load(cluster *c, json_t *o, prs_error *err)
{
    prs_infer_online *s = c->levels;
    if (!s) return prs_error_set(err, PRS_EINVAL, "levels: the cluster has no periodic levels");
    int gpus = c->spec.gpus, bad = !json_is_object(o);
    json_t *pools = bad ? NULL : json_object_get(o, "pools");
    bad = bad || get_ints(json_object_get(o, "budget"), s->budget, PRS_INFER_NCLASS, gpus) ||
          get_ints(json_object_get(o, "g"), s->g, PRS_INFER_NCLASS, gpus) ||
          get_ints(json_object_get(o, "k"), s->k, PRS_INFER_NCLASS, 1000000000) ||
          windows_load(s, json_object_get(o, "windows")) ||
          act_load(json_object_get(o, "cluster_act"), &s->cluster_act) ||
          act_load(json_object_get(o, "pool_act"), &s->pool_act) || !json_is_array(pools) ||
          json_array_size(pools) != PRS_INFER_NCLASS ||
          longs_load(json_object_get(o, "decisions"), s->decisions, PRS_INFER_NDEC) ||
          longs_load(json_object_get(o, "reconf"), s->reconf, PRS_INFER_NRECONF);
    for (int p = 0; !bad && p < PRS_INFER_NCLASS; p++)
        bad = act_load(json_array_get(pools, (size_t)p), &s->pool[p]);
    if (bad) return prs_error_set(err, PRS_EINVAL, "levels: the stored state does not parse");
    s->t0_s = real_or(json_object_get(o, "t0"), 0);
    s->last_s = real_or(json_object_get(o, "last"), s->t0_s);
    s->cluster_slot = (long)json_integer_value(json_object_get(o, "cluster_slot"));
    s->pool_slot = (long)json_integer_value(json_object_get(o, "pool_slot"));
    s->started = 1;
    prs_infer_online_rebuild(s);
    return 0;
}
