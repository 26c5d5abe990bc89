/* One-shot planning for a given load (plan.h): the dynamic policy's three levels applied to a
 * steady load, with every TP and clock allowed: the cluster split and the pool optima come from
 * the exact sizing (sizing.h), the clocks from the chosen instances' loads. */
#include "plan.h"

#include <math.h>
#include <string.h>

#include "sizing.h"

static int single(const prs_infer_captable *caps, const prs_infer_opts *o, double total,
                  prs_infer_plan *out, prs_error *err)
{
    int a = caps->n_tps - 1, f = caps->n_clocks - 1;
    const prs_infer_cap *c = &caps->cap[PRS_INFER_NCLASS][a][f];
    if (!(c->rate_rps > 0))
        return prs_error_set(err, PRS_EINVAL, "singlepool (TP %d, %d MHz) meets no SLO",
                             caps->tps[a], caps->clocks[f]);
    int n = (int)ceil(total / (c->rate_rps * o->max_util) - 1e-9);
    out->single_instances = n;
    out->single_gpus = n * caps->tps[a];
    double per = n ? total / n : 0;
    out->single_power_w = n * prs_infer_cap_power(c, per);
    return PRS_OK;
}

void prs_infer_plan_fill_pool(const prs_infer_captable *caps, const prs_infer_pool_table *t, int g,
                              int k, double rate, prs_infer_plan_pool *pp)
{
    int count[PRS_INFER_MAX_TPS], lt[PRS_INFER_PLAN_MAX_INST], lu[PRS_INFER_PLAN_MAX_INST];
    pp->load_rps = rate;
    pp->gpus = g;
    pp->power_w = prs_infer_pool_exact(t, g, k);
    int n = prs_infer_pool_instances(t, g, k, count, lt, lu, PRS_INFER_PLAN_MAX_INST);
    pp->n_inst = n < 0 ? 0 : n > PRS_INFER_PLAN_MAX_INST ? PRS_INFER_PLAN_MAX_INST : n;
    for (int i = 0; i < pp->n_inst; i++) {
        int a = lt[i], j = lu[i];
        pp->inst[i] = (prs_infer_plan_inst){t->m.tp[a], caps->clocks[t->m.clock_of[a][j]],
                                            j * t->m.unit_rps, t->m.power_w[a][j]};
    }
}

int prs_infer_plan_load(const prs_infer_captable *caps, const prs_infer_opts *o,
                        const double *rates_rps, prs_infer_plan *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    prs_infer_pool_table tables[PRS_INFER_NCLASS];
    const prs_infer_pool_table *tp[PRS_INFER_NCLASS];
    int k[PRS_INFER_NCLASS], g[PRS_INFER_NCLASS], rc = PRS_OK;
    double total = 0;
    for (int c = 0; c < PRS_INFER_NCLASS && !rc; c++) {
        prs_infer_pool_model m;
        memset(&tables[c], 0, sizeof tables[c]);
        rc = prs_infer_pool_model_build(caps, c, (1u << caps->n_tps) - 1, 1, o->units_top,
                                        o->max_util, &m, err);
        if (rc && rates_rps[c] == 0) {
            memset(&m, 0, sizeof m);
            m.unit_rps = 1;
            rc = PRS_OK;
        }
        if (!rc) rc = prs_infer_pool_table_build(&m, o->gpus, &tables[c], err);
        tp[c] = &tables[c];
        k[c] = rc ? 0 : prs_infer_pool_units(&tables[c], rates_rps[c]);
        total += rates_rps[c];
    }
    if (!rc) {
        out->power_w = prs_infer_cluster_split(tp, k, PRS_INFER_NCLASS, o->gpus, g);
        if (!isfinite(out->power_w))
            rc = prs_error_set(err, PRS_ERANGE, "the load does not fit %d GPUs", o->gpus);
        else if (o->power_cap_w > 0 && out->power_w > o->power_cap_w)
            rc = prs_error_set(err, PRS_ERANGE,
                               "the least power that carries the load within the SLOs is %.0f W, "
                               "above the budget of %.0f W",
                               out->power_w, o->power_cap_w);
    }
    for (int c = 0; c < PRS_INFER_NCLASS && !rc; c++) {
        prs_infer_plan_fill_pool(caps, &tables[c], g[c], k[c], rates_rps[c], &out->pool[c]);
        out->gpus += g[c];
    }
    if (!rc) rc = single(caps, o, total, out, err);
    for (int c = 0; c < PRS_INFER_NCLASS; c++)
        prs_infer_pool_table_free(&tables[c]);
    return rc;
}
