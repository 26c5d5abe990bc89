/* The serving policies' decisions (cluster_int.h), DynamoLLM's three levels and the baselines
 * made of some of them.
 *
 *   cluster level (instances, every cluster period): the GPUs of each pool, by the exact split
 *     of the cluster among pools (sizing.h) at each pool's forecast peak load;
 *   pool level (TP, every pool period): the instance mix within the pool's GPUs at the pool's
 *     forecast peak over the next pool period: the exact optimum of the sizing table;
 *   instance level (clock, every instance period): the clock of least power whose capacity
 *     covers the instance's share of the pool's recent load (the top clock when none does).
 *
 * A forecast is the peak rate over peak-window windows of the past period (the first period,
 * with no past, is planned on its own load) or, with the oracle, of the next. A reconfiguration
 * is charged: a new instance holds its GPUs idle while it starts (start_s, loading weights) or,
 * when GPUs the pool gives up in the same decision can take it, while its TP group re-forms over
 * the weights they hold (reshard_s); a clock change pauses the instance (clock_s). A pool change
 * is made only when the power it saves over the next period exceeds the energy of those
 * pauses, or when the pool's instances cannot carry the forecast load. Static policies are
 * sized once, for the trace's peak. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"
#include "levels.h"

void prs__infer_policy_flags(prs_infer_policy p, const prs_infer_opts *o, prs__infer_flags *f)
{
    memset(f, 0, sizeof *f);
    f->npools = p == PRS_INFER_SINGLEPOOL ? 1 : PRS_INFER_NCLASS;
    int all = p == PRS_INFER_DYNAMOLLM || p == PRS_INFER_ORACLE || p == PRS_INFER_PHASE;
    f->knob_inst = p == PRS_INFER_INSTANCES || all;
    f->knob_tp = p == PRS_INFER_TP || all;
    f->knob_clock = p == PRS_INFER_CLOCK || all;
    f->phase = p == PRS_INFER_PHASE;
    f->oracle = o->oracle || p == PRS_INFER_ORACLE;
    f->free_reconf = p == PRS_INFER_ORACLE;
    f->cluster_period_s = p == PRS_INFER_ORACLE ? o->pool_period_s : o->cluster_period_s;
}

static int top_type(const prs__infer_cluster *c)
{
    return c->caps->n_tps - 1;
}
static int top_clock(const prs__infer_cluster *c)
{
    return c->caps->n_clocks - 1;
}

/* Captable index of the pool model's type n. */
static int cap_type(const prs__infer_cluster *c, const prs_infer_pool_model *m, int n)
{
    for (int a = 0; a < c->caps->n_tps; a++)
        if (c->caps->tps[a] == m->tp[n]) return a;
    return top_type(c);
}

static int model_type(const prs_infer_pool_model *m, int tp)
{
    for (int n = 0; n < m->n_types; n++)
        if (m->tp[n] == tp) return n;
    return -1;
}

/* A pool no request is routed to may have no configuration meeting its SLOs: it gets an empty
 * model (it can carry nothing, and needs nothing). */
static int build_tables(prs__infer_cluster *c, unsigned tp_mask, int clock_knob, prs_error *err)
{
    for (int p = 0; p < c->fl.npools; p++) {
        prs_infer_pool_table_free(&c->tables[p]);
        prs_infer_pool_model m;
        int rc = prs_infer_pool_model_build(c->caps, c->mix_of_pool[p], tp_mask, clock_knob,
                                            c->o->units_top, c->o->max_util, &m, err);
        if (rc == PRS_EINVAL && prs__infer_pool_rate(c, p, 0, INFINITY) == 0) {
            memset(&m, 0, sizeof m);
            m.unit_rps = 1;
            rc = PRS_OK;
        }
        if (!rc) rc = prs_infer_pool_table_build(&m, c->o->gpus, &c->tables[p], err);
        if (rc) return rc;
    }
    return PRS_OK;
}

/* Each pool's forecast load in units, over [now, now + period) (oracle) or the period before. */
static void forecast(const prs__infer_cluster *c, double now, double period, int *k)
{
    double from = c->fl.oracle || now < period ? now : now - period;
    for (int p = 0; p < c->fl.npools; p++) {
        double peak = prs__infer_pool_peak(c, p, from, from + period);
        k[p] = prs_infer_pool_units(&c->tables[p], peak * c->o->headroom);
    }
}

/* Split the cluster among the pools for loads k (levels.h); a shortfall is counted as
 * under-provisioned, or as short of the power budget. */
static void split(prs__infer_cluster *c, int *k, int *g)
{
    const prs_infer_pool_table *t[PRS_INFER_NCLASS] = {0};
    for (int p = 0; p < c->fl.npools; p++)
        t[p] = &c->tables[p];
    int why = prs_infer_levels_split(t, c->fl.npools, c->o->gpus, c->o->power_cap_w, k, g);
    if (why == PRS_INFER_SPLIT_CAP_SHORT) c->res->cap_short++;
    if (why == PRS_INFER_SPLIT_UNDER) c->res->underprovisioned++;
}

/* Power of the pool's current instances carrying k units, split in proportion to capacity;
 * INFINITY when they cannot carry it. */
static double current_power(const prs__infer_cluster *c, int p, int k)
{
    const prs_infer_pool_model *m = &c->tables[p].m;
    int *types = malloc((size_t)(c->n_inst ? c->n_inst : 1) * sizeof *types), n = 0;
    if (!types) return INFINITY;
    for (int i = 0; i < c->n_inst; i++) {
        const prs__infer_inst *in = &c->inst[i];
        if (in->pool == p && in->state != INST_DRAINING && in->retire_s == 0)
            types[n++] = model_type(m, c->caps->tps[in->type]);
    }
    double pw = prs_infer_levels_power(m, types, n, k);
    free(types);
    return pw;
}

/* Retire `n` of the pool's instances of captable type a at retire_s, the least loaded first. */
static int retire_some(prs__infer_cluster *c, int p, int a, int n, double retire_s)
{
    int freed = 0;
    for (; n > 0; n--) {
        int best = -1;
        for (int i = 0; i < c->n_inst; i++) {
            const prs__infer_inst *in = &c->inst[i];
            if (in->pool != p || in->type != a || in->state == INST_DRAINING || in->retire_s > 0)
                continue;
            if (best < 0 || prs_infer_engine_outstanding_tokens(in->e) <
                                prs_infer_engine_outstanding_tokens(c->inst[best].e))
                best = i;
        }
        if (best < 0) break;
        prs__infer_cluster_retire(c, best, retire_s);
        freed += c->caps->tps[a];
    }
    return freed;
}

/* Move pool p to want[a] instances of each captable type (planned power new_w at k units).
 * initial: at time 0, free and immediate. */
static int apply_pool(prs__infer_cluster *c, int p, const int *want, int k, double new_w,
                      int initial, prs_error *err)
{
    int have[PRS_INFER_MAX_TPS] = {0};
    for (int i = 0; i < c->n_inst; i++)
        if (c->inst[i].pool == p && c->inst[i].state != INST_DRAINING && c->inst[i].retire_s == 0)
            have[c->inst[i].type]++;
    int same = 1, add_gpus = 0, drop_gpus = 0;
    for (int a = 0; a < c->caps->n_tps; a++) {
        same &= have[a] == want[a];
        if (want[a] > have[a]) add_gpus += (want[a] - have[a]) * c->caps->tps[a];
        if (want[a] < have[a]) drop_gpus += (have[a] - want[a]) * c->caps->tps[a];
    }
    if (same) return PRS_OK;
    int free_reconf = initial || c->fl.free_reconf;
    if (!free_reconf) {
        double cur_w = current_power(c, p, k);
        const prs_infer_cap *top = &c->caps->cap[c->mix_of_pool[p]][top_type(c)][top_clock(c)];
        double idle_per_gpu = top->idle_w / c->caps->tps[top_type(c)];
        double cost_j = prs_infer_levels_reconf_j(idle_per_gpu, add_gpus, drop_gpus,
                                                  c->o->reshard_s, c->o->start_s);
        if (!prs_infer_levels_pays(cur_w, new_w, c->o->pool_period_s, cost_j)) {
            c->res->reconf[PRS_INFER_RECONF_SKIPPED]++;
            return PRS_OK;
        }
    }
    /* Make before break: leaving instances serve until the last new one is ready. */
    double ready = c->now_s;
    if (!free_reconf && add_gpus > 0)
        ready += drop_gpus >= add_gpus ? c->o->reshard_s : c->o->start_s;
    int freed = 0;
    for (int a = 0; a < c->caps->n_tps; a++)
        if (have[a] > want[a]) {
            freed += retire_some(c, p, a, have[a] - want[a], ready);
            if (!initial) c->res->reconf[PRS_INFER_RECONF_STOP] += have[a] - want[a];
        }
    int clock = top_clock(c);
    for (int a = 0; a < c->caps->n_tps; a++)
        for (int n = have[a]; n < want[a]; n++) {
            int kind = freed >= c->caps->tps[a] ? PRS_INFER_RECONF_RESHARD : PRS_INFER_RECONF_START;
            if (kind == PRS_INFER_RECONF_RESHARD) freed -= c->caps->tps[a];
            double t = free_reconf                        ? 0
                       : kind == PRS_INFER_RECONF_RESHARD ? c->o->reshard_s
                                                          : c->o->start_s;
            int rc = prs__infer_cluster_add(c, p, a, clock, c->now_s + t, err);
            if (rc) return rc;
            if (!initial) c->res->reconf[kind]++;
        }
    return PRS_OK;
}

/* Pool level: the optimum instance mix for k units within the pool's budget (exactly the
 * budget when the pool may not change its GPUs, i.e. TP is the only knob). */
static int plan_pool(prs__infer_cluster *c, int p, int k, int initial, prs_error *err)
{
    const prs_infer_pool_table *t = &c->tables[p];
    int exact_only = !c->fl.knob_inst;
    /* A pool whose load outgrew its budget between cluster decisions takes GPUs no pool holds,
     * as many as it needs. */
    int grow = !exact_only && !(c->o->power_cap_w > 0), free_gpus = c->o->gpus;
    for (int q = 0; q < c->fl.npools; q++)
        free_gpus -= c->budget[q];
    int count[PRS_INFER_MAX_TPS];
    double new_w;
    if (prs_infer_levels_pool(t, &c->budget[p], free_gpus, grow, exact_only, k, count, &k, &new_w) <
        0)
        return PRS_OK;
    int want[PRS_INFER_MAX_TPS] = {0};
    for (int n = 0; n < t->m.n_types; n++)
        want[cap_type(c, &t->m, n)] = count[n];
    return apply_pool(c, p, want, k, new_w, initial, err);
}

/* The clock of least power whose capacity covers rate r for instance i (the top when none). */
static int least_clock(const prs__infer_cluster *c, int i, double r)
{
    const prs__infer_inst *in = &c->inst[i];
    int best = top_clock(c);
    double best_w = INFINITY;
    for (int f = 0; f < c->caps->n_clocks; f++) {
        const prs_infer_cap *cp = &c->caps->cap[c->mix_of_pool[in->pool]][in->type][f];
        if (cp->rate_rps * c->o->max_util < r || !(cp->rate_rps > 0)) continue;
        double w = prs_infer_cap_power(cp, r);
        if (w < best_w) {
            best_w = w;
            best = f;
        }
    }
    return best;
}

/* Each active instance's share of its pool's highest 5-s rate over the window, into rate_rps. */
static void share_rates(prs__infer_cluster *c, double now)
{
    double win = 6 * c->o->instance_period_s;
    double from = c->fl.oracle ? now : now - win;
    for (int p = 0; p < c->fl.npools; p++) {
        double rate = prs__infer_pool_bin_peak(c, p, from, from + win) * c->o->headroom;
        const prs_infer_pool_model *m = &c->tables[p].m;
        int total = 0;
        for (int i = 0; i < c->n_inst; i++) {
            int n = model_type(m, c->caps->tps[c->inst[i].type]);
            if (c->inst[i].pool == p && c->inst[i].state == INST_ACTIVE && n >= 0)
                total += m->units[n];
        }
        for (int i = 0; i < c->n_inst; i++) {
            prs__infer_inst *in = &c->inst[i];
            if (in->pool != p) continue;
            int n = model_type(m, c->caps->tps[in->type]);
            in->rate_rps = in->state != INST_ACTIVE ? 0
                           : total > 0 && n >= 0    ? rate * m->units[n] / total
                                                    : rate;
        }
    }
}

/* Instance level: each active instance's clock for its share of its pool's recent load (the
 * top clock for the policies without the clock knob), lowered to fit the power budget; the
 * phase policy's decode clocks. */
static int plan_clocks(prs__infer_cluster *c, double now, prs_error *err)
{
    share_rates(c, now);
    int *want = malloc((size_t)(c->n_inst ? c->n_inst : 1) * sizeof *want);
    if (!want) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (int i = 0; i < c->n_inst; i++) {
        const prs__infer_inst *in = &c->inst[i];
        want[i] = in->state != INST_ACTIVE ? in->clock
                  : c->fl.knob_clock       ? least_clock(c, i, in->rate_rps)
                                           : top_clock(c);
    }
    prs__infer_powercap_fit(c, want);
    int rc = PRS_OK;
    for (int i = 0; !rc && i < c->n_inst; i++) {
        if (c->inst[i].state != INST_ACTIVE) continue;
        rc = prs__infer_cluster_set_clock(c, i, want[i], err);
        if (!rc && c->fl.phase) rc = prs__infer_phase_clock(c, i, err);
    }
    free(want);
    return rc;
}

/* Cluster level: the pools' budgets at the period's forecast. */
static void plan_cluster(prs__infer_cluster *c, double now)
{
    int k[PRS_INFER_NCLASS] = {0};
    forecast(c, now, c->fl.cluster_period_s, k);
    split(c, k, c->budget);
}

/* Static sizing: every pool at its peak over the whole trace, top TP and clock. */
static int size_static(prs__infer_cluster *c, prs_error *err)
{
    const prs_infer_trace *tr = c->trace;
    double end = tr->reqs[tr->n - 1].arrival_s + c->o->instance_period_s;
    int k[PRS_INFER_NCLASS] = {0};
    const prs_infer_pool_table *t[PRS_INFER_NCLASS] = {0};
    for (int p = 0; p < c->fl.npools; p++) {
        k[p] = prs_infer_pool_units(&c->tables[p], prs__infer_pool_peak(c, p, 0, end));
        t[p] = &c->tables[p];
    }
    if (isfinite(prs_infer_cluster_split(t, k, c->fl.npools, c->o->gpus, c->budget))) return PRS_OK;
    if (c->fl.npools > 1) {
        /* Nine pools round up nine times: they may not fit where one pool does. Serve what
         * fits (the shortfall is counted as under-provisioned) rather than refuse. */
        split(c, k, c->budget);
        return PRS_OK;
    }
    int need = 0;
    for (int p = 0; p < c->fl.npools; p++) {
        const prs_infer_pool_model *m = &c->tables[p].m;
        int per = m->units[m->n_types - 1];
        need += per > 0 ? (k[p] + per - 1) / per * m->tp[m->n_types - 1] : 0;
    }
    return prs_error_set(err, PRS_EINVAL,
                         "singlepool needs %d GPUs at the trace's peak (TP %d at %d MHz), the "
                         "cluster has %d: lower the load (--scale, --peak-share) or add GPUs",
                         need, c->caps->tps[top_type(c)], c->caps->clocks[top_clock(c)],
                         c->o->gpus);
}

int prs__infer_policy_init(prs__infer_cluster *c, prs_error *err)
{
    for (int p = 0; p < c->fl.npools; p++)
        c->mix_of_pool[p] = c->fl.npools == 1 ? PRS_INFER_NCLASS : p;
    unsigned top_mask = 1u << top_type(c);
    int rc = build_tables(c, top_mask, 0, err);
    if (!rc && !c->fl.knob_inst) rc = size_static(c, err);
    if (!rc && (c->fl.knob_tp || c->fl.knob_clock))
        rc = build_tables(c, c->fl.knob_tp ? (1u << c->caps->n_tps) - 1 : top_mask,
                          c->fl.knob_clock, err);
    if (rc) return rc;
    if (c->fl.knob_inst) plan_cluster(c, 0);
    double period = c->fl.knob_tp ? c->o->pool_period_s : c->fl.cluster_period_s;
    int k[PRS_INFER_NCLASS] = {0};
    forecast(c, 0, period, k);
    for (int p = 0; !rc && p < c->fl.npools; p++) {
        if (c->fl.knob_tp || c->fl.knob_inst) {
            rc = plan_pool(c, p, k[p], 1, err);
        } else {
            int want[PRS_INFER_MAX_TPS] = {0};
            want[top_type(c)] = c->budget[p] / c->caps->tps[top_type(c)];
            rc = apply_pool(c, p, want, 0, 0, 1, err);
        }
    }
    if (!rc && (c->fl.knob_clock || c->o->power_cap_w > 0)) rc = plan_clocks(c, 0, err);
    return rc;
}

int prs__infer_policy_tick(prs__infer_cluster *c, double now_s, prs_error *err)
{
    long n = llround(now_s / c->o->instance_period_s);
    if (n == 0) return PRS_OK;
    long per_pool = llround(c->o->pool_period_s / c->o->instance_period_s);
    long per_cluster = llround(c->fl.cluster_period_s / c->o->instance_period_s);
    int rc = PRS_OK;
    if (c->fl.knob_inst && n % per_cluster == 0) plan_cluster(c, now_s);
    int pool_due = c->fl.knob_tp ? n % per_pool == 0 : c->fl.knob_inst && n % per_cluster == 0;
    if (pool_due) {
        int k[PRS_INFER_NCLASS] = {0};
        forecast(c, now_s, c->fl.knob_tp ? c->o->pool_period_s : c->fl.cluster_period_s, k);
        for (int p = 0; !rc && p < c->fl.npools; p++)
            rc = plan_pool(c, p, k[p], 0, err);
    }
    if (!rc && (c->fl.knob_clock || c->o->power_cap_w > 0)) rc = plan_clocks(c, now_s, err);
    return rc;
}

int prs__infer_policy_emergency(prs__infer_cluster *c, int i, prs_error *err)
{
    if (!c->fl.knob_clock || c->inst[i].clock == top_clock(c) ||
        !prs__infer_powercap_room(c, i, top_clock(c)))
        return 0;
    int rc = prs__infer_cluster_set_clock(c, i, top_clock(c), err);
    return rc ? rc : 1;
}
