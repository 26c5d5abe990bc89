/* Phase-aware clocks (cluster_int.h; the phase policy): an instance's prefills run at the clock
 * its policy chose (dynamollm's instance level, under the budget if any), its decode steps at a
 * clock of their own. A decode step reads the weights and the KV cache, so it is bound by memory
 * bandwidth and slows down far less than the clock when the clock drops, while the power falls
 * with it; a prefill is bound by compute and slows down with the clock. A single clock per
 * instance, as DynamoLLM's per-request profile allows, must suit both; the phase-level profile
 * answers each on its own.
 *
 * The decode clock is the lowest of the profile's clocks, at most the prefill clock, at which a
 * decode step of the instance's running batch takes at most (1 + phase_slack) times as long as
 * at the prefill clock: the inter-token gaps grow by at most that share. It is re-chosen every
 * instance period; an instance with nothing running keeps its decode clock. */
#include "cluster_int.h"

int prs__infer_phase_clock(prs__infer_cluster *c, int i, prs_error *err)
{
    prs_infer_engine *e = c->inst[i].e;
    int n;
    long ctx;
    prs_infer_engine_running(e, &n, &ctx);
    if (n == 0) return PRS_OK;
    const prs_infer_perf *p = c->perf;
    const int *mhz;
    int n_clocks;
    int rc = p->clocks(p->ctx, &mhz, &n_clocks);
    if (rc) return rc;
    int tp = prs_infer_engine_tp(e), top = prs_infer_engine_clock(e);
    prs_infer_decode it = {n, ctx + n};
    double t_top, j;
    rc = p->decode(p->ctx, tp, top, &it, &t_top, &j, err);
    if (rc) return rc;
    int pick = top;
    for (int f = 0; f < n_clocks && mhz[f] < top; f++) {
        double t;
        rc = p->decode(p->ctx, tp, mhz[f], &it, &t, &j, err);
        if (rc) return rc;
        if (t <= (1 + c->o->phase_slack) * t_top) {
            pick = mhz[f];
            break;
        }
    }
    prs_infer_engine_set_decode_clock(e, pick);
    return PRS_OK;
}
