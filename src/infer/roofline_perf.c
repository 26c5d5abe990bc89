/* The roofline model as a performance backend (roofline_perf.h): each callback is the model's
 * arithmetic, as perseus-fakeserve calls it (a prefill of n prompts at their mean length, a
 * decode step of n sequences at their mean context). */
#include "roofline_perf.h"

static int cb_prefill(void *ctx, int tp, int mhz, const prs_infer_prefill *it, double *time_s,
                      double *energy_j, prs_error *err)
{
    (void)err;
    const prs_infer_roofline_perf *rp = ctx;
    prs_infer_roofline_prefill(&rp->model, tp, mhz, it->n_seqs, (double)it->tokens / it->n_seqs,
                               time_s, energy_j);
    return PRS_OK;
}

static int cb_decode(void *ctx, int tp, int mhz, const prs_infer_decode *it, double *time_s,
                     double *energy_j, prs_error *err)
{
    (void)err;
    const prs_infer_roofline_perf *rp = ctx;
    prs_infer_roofline_decode(&rp->model, tp, mhz, it->n_seqs, (double)it->ctx_tokens / it->n_seqs,
                              time_s, energy_j);
    return PRS_OK;
}

static int cb_idle_power(void *ctx, int tp, int mhz, double *power_w, prs_error *err)
{
    (void)mhz;
    (void)err;
    const prs_infer_roofline_perf *rp = ctx;
    *power_w = prs_infer_roofline_idle_w(&rp->model, tp);
    return PRS_OK;
}

static int cb_capacity(void *ctx, int tp, long *kv_tokens, int *max_batch, prs_error *err)
{
    const prs_infer_roofline_perf *rp = ctx;
    *max_batch = rp->max_batch;
    return prs_infer_roofline_kv_tokens(&rp->model, tp, kv_tokens, err);
}

static int cb_clocks(void *ctx, const int **mhz, int *n)
{
    const prs_infer_roofline_perf *rp = ctx;
    *mhz = rp->clocks;
    *n = rp->nclk;
    return PRS_OK;
}

static int cb_tps(void *ctx, const int **tp, int *n)
{
    const prs_infer_roofline_perf *rp = ctx;
    *tp = rp->tps;
    *n = rp->ntp;
    return PRS_OK;
}

int prs_infer_roofline_perf_init(prs_infer_roofline_perf *rp, const prs_infer_roofline *model,
                                 int max_batch, int step_mhz, prs_infer_perf *out, prs_error *err)
{
    if (max_batch < 1 || step_mhz < 1)
        return prs_error_set(err, PRS_EINVAL, "largest batch and clock step must be >= 1");
    rp->model = *model;
    rp->max_batch = max_batch;
    const prs_infer_gpu *g = model->gpu;
    rp->nclk = 0;
    for (int f = g->f_min_mhz;
         f < g->f_max_mhz && rp->nclk < PRS_INFER_ROOFLINE_PERF_MAX_CLOCKS - 1; f += step_mhz)
        rp->clocks[rp->nclk++] = f;
    rp->clocks[rp->nclk++] = g->f_max_mhz;
    rp->ntp = 0;
    for (int tp = 1; tp <= 64; tp *= 2) {
        long kv;
        if (prs_infer_roofline_kv_tokens(model, tp, &kv, NULL) == PRS_OK) rp->tps[rp->ntp++] = tp;
    }
    *out =
        (prs_infer_perf){rp, cb_prefill, cb_decode, cb_idle_power, cb_capacity, cb_clocks, cb_tps};
    return PRS_OK;
}
