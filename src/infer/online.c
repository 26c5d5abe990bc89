/* The cluster and pool levels online (online.h): report windows, forecasts, and the levels'
 * decisions, made by the emulator's code (levels.h). */
#include "online.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "levels.h"

int prs_infer_online_check(const prs_infer_opts *o, prs_error *err)
{
    if (!(o->peak_window_s > 0))
        return prs_error_set(err, PRS_EINVAL, "peak_window_s: must be > 0 (got %g)",
                             o->peak_window_s);
    if (!(o->pool_period_s >= o->peak_window_s))
        return prs_error_set(err, PRS_EINVAL, "pool_period_s: %g, shorter than peak_window_s %g",
                             o->pool_period_s, o->peak_window_s);
    if (!(o->cluster_period_s >= o->pool_period_s))
        return prs_error_set(err, PRS_EINVAL, "cluster_period_s: %g, shorter than pool_period_s %g",
                             o->cluster_period_s, o->pool_period_s);
    if (o->cluster_period_s / o->peak_window_s > PRS_INFER_ONLINE_WINDOWS - 2)
        return prs_error_set(err, PRS_EINVAL,
                             "cluster_period_s: at most %d peak windows (%g s) in a period",
                             PRS_INFER_ONLINE_WINDOWS - 2, o->peak_window_s);
    return PRS_OK;
}

int prs_infer_online_new(const prs_infer_captable *caps, const prs_infer_opts *o, int emergencies,
                         prs_infer_online **out, prs_error *err)
{
    *out = NULL;
    int rc = prs_infer_online_check(o, err);
    if (rc) return rc;
    prs_infer_online *s = calloc(1, sizeof *s);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    s->caps = caps;
    s->o = o;
    s->emergencies = emergencies;
    prs_infer_online_reset(s);
    for (int p = 0; !rc && p < PRS_INFER_NCLASS; p++) {
        prs_infer_pool_model m;
        prs_error why = {0};
        if (prs_infer_pool_model_build(caps, p, (1u << caps->n_tps) - 1, 1, o->units_top,
                                       o->max_util, &m, &why)) {
            /* A class nothing serves within its SLOs carries nothing and needs nothing. */
            snprintf(s->no_config[p], sizeof s->no_config[p], "%s", why.msg);
            memset(&m, 0, sizeof m);
            m.unit_rps = 1;
        }
        rc = prs_infer_pool_table_build(&m, o->gpus, &s->tables[p], err);
    }
    if (rc) {
        prs_infer_online_free(s);
        return rc;
    }
    *out = s;
    return PRS_OK;
}

void prs_infer_online_reset(prs_infer_online *s)
{
    size_t from = offsetof(prs_infer_online, started);
    memset((char *)s + from, 0, sizeof *s - from);
    for (int i = 0; i < PRS_INFER_ONLINE_WINDOWS; i++)
        s->win[i].index = -1;
}

void prs_infer_online_free(prs_infer_online *s)
{
    if (!s) return;
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        prs_infer_pool_table_free(&s->tables[p]);
    free(s);
}

/* The window of a report r seconds after the first: (w pw, (w + 1) pw], stored as w + 1. */
static long window_of(const prs_infer_online *s, double r)
{
    return (long)ceil(r / s->o->peak_window_s - 1e-9);
}

static void add_report(prs_infer_online *s, double r, const double *rates)
{
    long idx = window_of(s, r);
    prs_infer_online_window *w = &s->win[idx % PRS_INFER_ONLINE_WINDOWS];
    if (w->index != idx) {
        memset(w, 0, sizeof *w);
        w->index = idx;
    }
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        w->sum_rps[p] += rates[p];
    w->n++;
}

/* Each pool's peak: the highest window mean among the windows ending within (r - period, r]. */
static void peaks(const prs_infer_online *s, double r, double period, double *peak)
{
    long lo = (long)floor((r - period) / s->o->peak_window_s + 1e-9) + 1, hi = window_of(s, r);
    if (lo < 0) lo = 0;
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        peak[p] = 0;
    for (long i = lo; i <= hi; i++) {
        const prs_infer_online_window *w = &s->win[i % PRS_INFER_ONLINE_WINDOWS];
        if (w->index != i || w->n == 0) continue;
        for (int p = 0; p < PRS_INFER_NCLASS; p++)
            peak[p] = fmax(peak[p], w->sum_rps[p] / w->n);
    }
}

void prs_infer_online_peaks(const prs_infer_online *s, double period_s, double *peak_rps)
{
    peaks(s, s->last_s - s->t0_s, period_s, peak_rps);
}

/* Each pool's forecast in units: its peak times the headroom. */
static void forecast(const prs_infer_online *s, double r, double period, int *k)
{
    double peak[PRS_INFER_NCLASS];
    peaks(s, r, period, peak);
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        k[p] = prs_infer_pool_units(&s->tables[p], peak[p] * s->o->headroom);
}

static int cap_type(const prs_infer_online *s, int tp)
{
    for (int a = 0; a < s->caps->n_tps; a++)
        if (s->caps->tps[a] == tp) return a;
    return s->caps->n_tps - 1;
}

static int model_type(const prs_infer_pool_model *m, int tp)
{
    for (int n = 0; n < m->n_types; n++)
        if (m->tp[n] == tp) return n;
    return -1;
}

/* The instances of the optimum of pool p at g GPUs and k units, by captable type. */
static void instances_of(const prs_infer_online *s, int p, int g, int k, int *have)
{
    const prs_infer_pool_table *t = &s->tables[p];
    int count[PRS_INFER_MAX_TPS], lt[1], lu[1];
    memset(have, 0, sizeof(int) * PRS_INFER_MAX_TPS);
    if (prs_infer_pool_instances(t, g, k, count, lt, lu, 0) < 0) return;
    for (int n = 0; n < t->m.n_types; n++)
        have[cap_type(s, t->m.tp[n])] += count[n];
}

/* Power of pool p's instances in force carrying k units (INFINITY when they cannot). */
static double power_in_force(const prs_infer_online *s, int p, int k)
{
    const prs_infer_pool_model *m = &s->tables[p].m;
    int have[PRS_INFER_MAX_TPS], n = 0;
    instances_of(s, p, s->g[p], s->k[p], have);
    for (int a = 0; a < s->caps->n_tps; a++)
        n += have[a];
    int *types = malloc((size_t)(n ? n : 1) * sizeof *types);
    if (!types) return INFINITY;
    n = 0;
    for (int a = 0; a < s->caps->n_tps; a++)
        for (int i = 0; i < have[a]; i++)
            types[n++] = model_type(m, s->caps->tps[a]);
    double w = prs_infer_levels_power(m, types, n, k);
    free(types);
    return w;
}

/* The cluster level: the pools' budgets for loads k. */
static void cluster_level(prs_infer_online *s, double t, int reason, int *k)
{
    const prs_infer_pool_table *tab[PRS_INFER_NCLASS];
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        tab[p] = &s->tables[p];
    int before[PRS_INFER_NCLASS];
    memcpy(before, s->budget, sizeof before);
    int why =
        prs_infer_levels_split(tab, PRS_INFER_NCLASS, s->o->gpus, s->o->power_cap_w, k, s->budget);
    if (why != PRS_INFER_SPLIT_FITS) s->short_of = why;
    int changed = memcmp(before, s->budget, sizeof before) != 0;
    s->cluster_act = (prs_infer_online_act){
        t, reason, changed ? PRS_INFER_OUT_CHANGED : PRS_INFER_OUT_KEPT, 0, 0};
    if (reason == PRS_INFER_ACT_PERIOD) s->decisions[PRS_INFER_DEC_CLUSTER_PERIOD]++;
    if (reason == PRS_INFER_ACT_EMERGENCY) s->decisions[PRS_INFER_DEC_CLUSTER_EMERGENCY]++;
}

/* Count a change from have to want as the emulator does: stops, then starts, each a re-form
 * where GPUs the change frees can take it. */
static void count_change(prs_infer_online *s, const int *have, const int *want)
{
    int freed = 0;
    for (int a = 0; a < s->caps->n_tps; a++)
        if (have[a] > want[a]) {
            s->reconf[PRS_INFER_RECONF_STOP] += have[a] - want[a];
            freed += (have[a] - want[a]) * s->caps->tps[a];
        }
    for (int a = 0; a < s->caps->n_tps; a++)
        for (int n = have[a]; n < want[a]; n++) {
            int reshard = freed >= s->caps->tps[a];
            if (reshard) freed -= s->caps->tps[a];
            s->reconf[reshard ? PRS_INFER_RECONF_RESHARD : PRS_INFER_RECONF_START]++;
        }
}

/* The pool level for pool p at k units: its outcome. */
static int pool_level(prs_infer_online *s, int p, int k, double t, int reason)
{
    int free_gpus = s->o->gpus, count[PRS_INFER_MAX_TPS];
    for (int q = 0; q < PRS_INFER_NCLASS; q++)
        free_gpus -= s->budget[q];
    double new_w;
    int g = prs_infer_levels_pool(&s->tables[p], &s->budget[p], free_gpus, !(s->o->power_cap_w > 0),
                                  0, k, count, &k, &new_w);
    if (g < 0) return PRS_INFER_OUT_KEPT;
    const prs_infer_pool_model *m = &s->tables[p].m;
    int want[PRS_INFER_MAX_TPS] = {0}, have[PRS_INFER_MAX_TPS], add = 0, drop = 0;
    for (int n = 0; n < m->n_types; n++)
        want[cap_type(s, m->tp[n])] += count[n];
    instances_of(s, p, s->g[p], s->k[p], have);
    for (int a = 0; a < s->caps->n_tps; a++) {
        if (want[a] > have[a]) add += (want[a] - have[a]) * s->caps->tps[a];
        if (want[a] < have[a]) drop += (have[a] - want[a]) * s->caps->tps[a];
    }
    prs_infer_online_act *act = &s->pool[p];
    *act = (prs_infer_online_act){t, reason, PRS_INFER_OUT_KEPT, 0, 0};
    if (add == 0 && drop == 0) {
        s->g[p] = g; /* the same instances, planned for the new load */
        s->k[p] = k;
        return PRS_INFER_OUT_KEPT;
    }
    if (reason != PRS_INFER_ACT_INITIAL) {
        int top = s->caps->n_tps - 1;
        const prs_infer_cap *c = &s->caps->cap[p][top][s->caps->n_clocks - 1];
        double cur_w = power_in_force(s, p, k);
        act->cost_j = prs_infer_levels_reconf_j(c->idle_w / s->caps->tps[top], add, drop,
                                                s->o->reshard_s, s->o->start_s);
        act->saving_j = (cur_w - new_w) * s->o->pool_period_s;
        if (!prs_infer_levels_pays(cur_w, new_w, s->o->pool_period_s, act->cost_j)) {
            s->reconf[PRS_INFER_RECONF_SKIPPED]++;
            s->decisions[PRS_INFER_DEC_POOL_SKIPPED]++;
            return act->outcome = PRS_INFER_OUT_SKIPPED;
        }
        count_change(s, have, want);
        s->decisions[reason == PRS_INFER_ACT_EMERGENCY ? PRS_INFER_DEC_POOL_EMERGENCY
                                                       : PRS_INFER_DEC_POOL_CHANGED]++;
    }
    s->g[p] = g;
    s->k[p] = k;
    return act->outcome = PRS_INFER_OUT_CHANGED;
}

/* The pool level for the pools in mask (bit p), the level's record summing theirs. */
static void pools(prs_infer_online *s, unsigned mask, const int *k, double t, int reason)
{
    prs_infer_online_act sum = {t, reason, PRS_INFER_OUT_KEPT, 0, 0};
    for (int p = 0; p < PRS_INFER_NCLASS; p++) {
        if (!(mask & (1u << p))) continue;
        int out = pool_level(s, p, k[p], t, reason);
        if (out == PRS_INFER_OUT_KEPT) continue;
        if (sum.outcome != PRS_INFER_OUT_CHANGED) sum.outcome = out;
        sum.saving_j += s->pool[p].saving_j;
        sum.cost_j += s->pool[p].cost_j;
    }
    s->pool_act = sum;
}

/* Pools whose instances in force cannot carry the current rates (bit p), and those loads. */
static unsigned unfit(const prs_infer_online *s, const double *rates, int *k_now)
{
    unsigned mask = 0;
    for (int p = 0; p < PRS_INFER_NCLASS; p++) {
        k_now[p] = prs_infer_pool_units(&s->tables[p], rates[p] * s->o->headroom);
        if (k_now[p] > 0 && !isfinite(power_in_force(s, p, k_now[p]))) mask |= 1u << p;
    }
    return mask;
}

static void emergency(prs_infer_online *s, double t, double r, const double *rates)
{
    int k_now[PRS_INFER_NCLASS], kc[PRS_INFER_NCLASS], kp[PRS_INFER_NCLASS];
    unsigned mask = unfit(s, rates, k_now);
    if (!mask) return;
    forecast(s, r, s->o->cluster_period_s, kc);
    forecast(s, r, s->o->pool_period_s, kp);
    for (int p = 0; p < PRS_INFER_NCLASS; p++) {
        kc[p] = kc[p] > k_now[p] ? kc[p] : k_now[p];
        kp[p] = kp[p] > k_now[p] ? kp[p] : k_now[p];
    }
    cluster_level(s, t, PRS_INFER_ACT_EMERGENCY, kc);
    pools(s, mask, kp, t, PRS_INFER_ACT_EMERGENCY);
}

void prs_infer_online_rebuild(prs_infer_online *s)
{
    memset(&s->plan, 0, sizeof s->plan);
    for (int p = 0; p < PRS_INFER_NCLASS; p++) {
        const prs_infer_pool_table *t = &s->tables[p];
        prs_infer_plan_fill_pool(s->caps, t, s->g[p], s->k[p], s->k[p] * t->m.unit_rps,
                                 &s->plan.pool[p]);
        if (!isfinite(s->plan.pool[p].power_w)) s->plan.pool[p].power_w = 0;
        s->plan.gpus += s->g[p];
        s->plan.power_w += s->plan.pool[p].power_w;
    }
}

static void decide(prs_infer_online *s, double t, const double *rates)
{
    double r = t - s->t0_s;
    int k[PRS_INFER_NCLASS];
    if (!s->started) {
        s->started = 1;
        s->t0_s = t;
        for (int p = 0; p < PRS_INFER_NCLASS; p++)
            k[p] = prs_infer_pool_units(&s->tables[p], rates[p] * s->o->headroom);
        int kc[PRS_INFER_NCLASS];
        memcpy(kc, k, sizeof kc);
        cluster_level(s, t, PRS_INFER_ACT_INITIAL, kc);
        pools(s, (1u << PRS_INFER_NCLASS) - 1, k, t, PRS_INFER_ACT_INITIAL);
        return;
    }
    long sc = (long)floor(r / s->o->cluster_period_s + 1e-9);
    long sp = (long)floor(r / s->o->pool_period_s + 1e-9);
    if (sc > s->cluster_slot) {
        s->cluster_slot = sc;
        forecast(s, r, s->o->cluster_period_s, k);
        cluster_level(s, t, PRS_INFER_ACT_PERIOD, k);
    }
    if (sp > s->pool_slot) {
        s->pool_slot = sp;
        forecast(s, r, s->o->pool_period_s, k);
        pools(s, (1u << PRS_INFER_NCLASS) - 1, k, t, PRS_INFER_ACT_PERIOD);
    }
    if (s->emergencies) emergency(s, t, r, rates);
}

int prs_infer_online_report(prs_infer_online *s, double t_s, const double *rates_rps,
                            prs_error *err)
{
    if (s->started && t_s < s->last_s) t_s = s->last_s;
    s->last_s = t_s;
    s->short_of = PRS_INFER_SPLIT_FITS;
    add_report(s, s->started ? t_s - s->t0_s : 0, rates_rps);
    decide(s, t_s, rates_rps);
    prs_infer_online_rebuild(s);
    for (int p = 0; p < PRS_INFER_NCLASS; p++)
        if (rates_rps[p] > 0 && s->no_config[p][0])
            return prs_error_set(err, PRS_EINVAL, "class %s: %s", prs_infer_class_name(p),
                                 s->no_config[p]);
    if (s->short_of != PRS_INFER_SPLIT_FITS)
        return prs_error_set(
            err, PRS_ERANGE,
            "the forecast load does not fit %d GPUs%s: planned for the largest "
            "share of it that does",
            s->o->gpus, s->short_of == PRS_INFER_SPLIT_CAP_SHORT ? " within the power budget" : "");
    return PRS_OK;
}

const char *prs_infer_online_reason_name(int reason)
{
    static const char *const n[] = {"none", "initial", "period", "emergency"};
    return reason >= 0 && reason <= PRS_INFER_ACT_EMERGENCY ? n[reason] : "none";
}

const char *prs_infer_online_outcome_name(int outcome)
{
    static const char *const n[] = {"kept", "changed", "skipped"};
    return outcome >= 0 && outcome <= PRS_INFER_OUT_SKIPPED ? n[outcome] : "kept";
}

const char *prs_infer_online_decision_name(int kind)
{
    static const char *const n[] = {"cluster_period", "cluster_emergency", "pool_changed",
                                    "pool_skipped", "pool_emergency"};
    return kind >= 0 && kind < PRS_INFER_NDEC ? n[kind] : "unknown";
}
