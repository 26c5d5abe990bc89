/* The synthetic inference model's arithmetic (roofline.h): iteration times from compute, memory
 * and all-reduce terms, energies from per-phase power curves on the GPU model. The formulas are
 * in roofline.h and docs/inference.md; the constants in roofline_presets.c. */
#include <math.h>

#include "roofline.h"

int prs_infer_roofline_init(prs_infer_roofline *r, const prs_infer_llm *m, const prs_infer_gpu *g,
                            prs_error *err)
{
    const prs_infer_calib *c = m && g ? prs_infer_calib_preset(m, g) : NULL;
    const prs_gpu_preset *power = g ? prs_gpu_preset_find(g->power_preset) : NULL;
    if (!c || !power)
        return prs_error_set(err, PRS_EINVAL, "no calibrated model for %s on %s", m ? m->name : "?",
                             g ? g->name : "?");
    r->llm = m;
    r->gpu = g;
    r->calib = *c;
    r->power = power;
    return PRS_OK;
}

/* Fixed costs: the iteration's own and the all-reduces' latency, a share of it at the clock. */
static double fixed_s(const prs_infer_roofline *r, int tp, double t0_s, double lat_s, double k)
{
    double lat = 2.0 * r->llm->layers * lat_s * log2((double)tp);
    return (t0_s + lat) * (1.0 - PRS_INFER_FIXED_CLOCK_SHARE + PRS_INFER_FIXED_CLOCK_SHARE * k);
}

/* All-reduce volume time: 2 per layer, of tokens x hidden fp16 values, ring factor 2(p-1)/p. */
static double allreduce_s(const prs_infer_roofline *r, int tp, double tokens, double bw)
{
    double bytes = 2.0 * r->llm->hidden * tokens;
    return 2.0 * r->llm->layers * (2.0 * (tp - 1) / tp) * bytes / bw;
}

static double weights_bytes(const prs_infer_llm *m)
{
    return m->params * m->bytes_per_param;
}

/* Per-GPU power of the prefill and decode phases at mhz. */
static double prefill_w(const prs_infer_roofline *r, double mhz)
{
    double p = prs_gpu_power_w(r->power, mhz);
    return p < r->gpu->prefill_w ? p : r->gpu->prefill_w;
}

static double decode_w(const prs_infer_roofline *r, double mhz)
{
    const prs_infer_gpu *g = r->gpu;
    double top = prefill_w(r, g->f_max_mhz) - g->idle_w;
    return g->idle_w + (prefill_w(r, mhz) - g->idle_w) * (g->decode_w - g->idle_w) / top;
}

void prs_infer_roofline_prefill(const prs_infer_roofline *r, int tp, double mhz, double batch,
                                double tokens, double *time_s, double *energy_j)
{
    const prs_infer_llm *m = r->llm;
    const prs_infer_gpu *g = r->gpu;
    double k = g->f_max_mhz / mhz, n = batch * tokens;
    double flops =
        2.0 * m->params * n + 2.0 * m->layers * (double)m->hidden * batch * tokens * tokens;
    double knee = pow(n / PRS_INFER_PREFILL_KNEE_TOKENS, 8.0);
    double eta = r->calib.eta_prefill_long +
                 (r->calib.eta_prefill - r->calib.eta_prefill_long) / (1.0 + knee);
    double t =
        flops * k / (tp * g->peak_flops * eta) +
        weights_bytes(m) / (tp * g->mem_bw_bps * r->calib.eta_mem) +
        allreduce_s(r, tp, n,
                    r->calib.ar_bw_prefill_long +
                        (r->calib.ar_bw_prefill - r->calib.ar_bw_prefill_long) / (1.0 + knee)) +
        fixed_s(r, tp, r->calib.t_prefill0_s + batch * r->calib.t_prefill_seq_s,
                r->calib.ar_lat_prefill_s, k);
    *time_s = t;
    *energy_j = t * tp * prefill_w(r, mhz);
}

void prs_infer_roofline_decode(const prs_infer_roofline *r, int tp, double mhz, double batch,
                               double tokens, double *time_s, double *energy_j)
{
    const prs_infer_llm *m = r->llm;
    const prs_infer_gpu *g = r->gpu;
    double k = g->f_max_mhz / mhz;
    double flops = 2.0 * m->params * batch + 4.0 * m->layers * (double)m->hidden * batch * tokens;
    double bytes = weights_bytes(m) + batch * tokens * m->kv_bytes_per_token;
    double t = flops * k / (tp * g->peak_flops * r->calib.eta_decode) +
               bytes / (tp * g->mem_bw_bps * r->calib.eta_mem) +
               allreduce_s(r, tp, batch, r->calib.ar_bw_decode) +
               fixed_s(r, tp, r->calib.t_decode0_s, r->calib.ar_lat_s, k);
    *time_s = t;
    *energy_j = t * tp * decode_w(r, mhz);
}

double prs_infer_roofline_idle_w(const prs_infer_roofline *r, int tp)
{
    return tp * r->gpu->idle_w;
}

int prs_infer_roofline_kv_tokens(const prs_infer_roofline *r, int tp, long *kv_tokens,
                                 prs_error *err)
{
    const prs_infer_gpu *g = r->gpu;
    double room = tp * (PRS_INFER_MEM_UTIL * g->mem_bytes - PRS_INFER_ACT_RESERVE_BYTES) -
                  weights_bytes(r->llm);
    double tokens = floor(room / r->llm->kv_bytes_per_token);
    if (!(tokens >= 1))
        return prs_error_set(
            err, PRS_EINVAL, "%s does not fit on %d %s GPUs: %.0f GB of weights, %.0f GB usable",
            r->llm->name, tp, g->name, weights_bytes(r->llm) / 1e9,
            tp * (PRS_INFER_MEM_UTIL * g->mem_bytes - PRS_INFER_ACT_RESERVE_BYTES) / 1e9);
    *kv_tokens = tokens > 1e15 ? (long)1e15 : (long)tokens;
    return PRS_OK;
}
