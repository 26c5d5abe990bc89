/* Built-in models, GPUs and calibrated constants of the synthetic inference model (roofline.h).
 *
 * Architectures from the models' public configurations; GPU figures from NVIDIA's spec sheets
 * (SXM parts, dense fp16/bf16 tensor throughput without sparsity, HBM bandwidth, 80 GiB); the
 * per-phase powers per GPU are the constant power model published with the Splitwise simulator
 * (idle, decode, prefill at the default clock). The calibrated constants are fitted by
 * bench/infer_calib.c (prs_infer_calib_fit, least squares on relative errors) on the Splitwise
 * measurements of both models on both GPUs at the default clock; how, and the fit's errors, in
 * docs/inference.md ("Calibration"). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "roofline.h"

static const prs_infer_llm LLMS[] = {
    /* 80 layers, width 8192, grouped-query attention with 8 KV heads of 128: the cache holds
     * 2 (K, V) x 80 x 8 x 128 fp16 values per token. */
    {.name = "llama2-70b",
     .layers = 80,
     .hidden = 8192,
     .params = 68.98e9,
     .bytes_per_param = 2.0,
     .kv_bytes_per_token = 2.0 * 80 * 8 * 128 * 2},
    /* 70 layers, width 14336, 112 heads of 128, no grouping: 2 x 70 x 14336 fp16 per token. */
    {.name = "bloom-176b",
     .layers = 70,
     .hidden = 14336,
     .params = 176.25e9,
     .bytes_per_param = 2.0,
     .kv_bytes_per_token = 2.0 * 70 * 14336 * 2},
};

static const prs_infer_gpu GPUS[] = {
    {.name = "a100",
     .power_preset = "a100",
     .peak_flops = 312e12,
     .mem_bw_bps = 2.039e12,
     .mem_bytes = 81920.0 * 1048576.0,
     .f_min_mhz = 210,
     .f_max_mhz = 1410,
     .idle_w = 63,
     .decode_w = 250,
     .prefill_w = 400},
    {.name = "h100",
     .power_preset = "h100",
     .peak_flops = 989.4e12,
     .mem_bw_bps = 3.35e12,
     .mem_bytes = 81559.0 * 1048576.0,
     .f_min_mhz = 345,
     .f_max_mhz = 1980,
     .idle_w = 75,
     .decode_w = 380,
     .prefill_w = 700},
};

/* Fitted constants, [model][gpu] in the order of the tables above: the output of
 * `infer_calib --fit` (bench/infer_calib.c: prs_infer_calib_fit from prs_infer_calib_start on
 * every cell of the pair) on the Splitwise measurements at the default clock. Shares that come
 * out at 1 sit at the bound of the fit. bloom-176b was measured at TP 8 only (its weights fit no
 * fewer 80 GB GPUs), so the data do not split its time between compute, all-reduce and fixed
 * terms: its constants reproduce TP 8 (huge all-reduce bandwidths mean "no such term") and are
 * used at TP 8 only. */
static const prs_infer_calib CALIBS[2][2] = {
    {
        /* llama2-70b on a100 */
        {.eta_prefill = 0.830278,
         .eta_prefill_long = 0.708093,
         .eta_decode = 0.999999,
         .eta_mem = 1,
         .t_prefill0_s = 1.34852e-11,
         .t_decode0_s = 0.0157377,
         .ar_bw_prefill = 1.2111e+11,
         .ar_bw_decode = 1.50685e+10,
         .ar_lat_s = 3.95115e-05,
         .ar_bw_prefill_long = 4.22722e+10,
         .t_prefill_seq_s = 0.0202414,
         .ar_lat_prefill_s = 2.71465e-05},
        /* llama2-70b on h100 */
        {.eta_prefill = 0.670775,
         .eta_prefill_long = 0.614187,
         .eta_decode = 0.26305,
         .eta_mem = 1,
         .t_prefill0_s = 4.84085e-09,
         .t_decode0_s = 0.0103449,
         .ar_bw_prefill = 3.34679e+11,
         .ar_bw_decode = 2.36496e+10,
         .ar_lat_s = 2.92363e-05,
         .ar_bw_prefill_long = 7.3202e+10,
         .t_prefill_seq_s = 2.69523e-07,
         .ar_lat_prefill_s = 7.16149e-05},
    },
    {
        /* bloom-176b on a100 */
        {.eta_prefill = 0.593042,
         .eta_prefill_long = 0.463667,
         .eta_decode = 0.589208,
         .eta_mem = 0.480727,
         .t_prefill0_s = 1.15478e-05,
         .t_decode0_s = 0.00041645,
         .ar_bw_prefill = 2.57571e+12,
         .ar_bw_decode = 6.14888e+10,
         .ar_lat_s = 6.25197e-06,
         .ar_bw_prefill_long = 9.82269e+10,
         .t_prefill_seq_s = 3.0131e-13,
         .ar_lat_prefill_s = 4.36681e-08},
        /* bloom-176b on h100 */
        {.eta_prefill = 0.470978,
         .eta_prefill_long = 0.278056,
         .eta_decode = 0.838905,
         .eta_mem = 0.617302,
         .t_prefill0_s = 0.00700339,
         .t_decode0_s = 0.0102111,
         .ar_bw_prefill = 1.23959e+16,
         .ar_bw_decode = 3.59457e+10,
         .ar_lat_s = 9.62577e-06,
         .ar_bw_prefill_long = 8.99139e+15,
         .t_prefill_seq_s = 7.48064e-11,
         .ar_lat_prefill_s = 6.85499e-06},
    },
};

#define NLLMS ((int)(sizeof LLMS / sizeof LLMS[0]))
#define NGPUS ((int)(sizeof GPUS / sizeof GPUS[0]))

const prs_infer_llm *prs_infer_llm_find(const char *name)
{
    for (int i = 0; name && i < NLLMS; i++)
        if (strcasecmp(name, LLMS[i].name) == 0) return &LLMS[i];
    return NULL;
}

const prs_infer_gpu *prs_infer_gpu_find(const char *name)
{
    for (int i = 0; name && i < NGPUS; i++)
        if (strcasecmp(name, GPUS[i].name) == 0) return &GPUS[i];
    return NULL;
}

static char *join(char *buf, size_t n, const char *const *names, int count)
{
    if (n == 0) return buf;
    buf[0] = '\0';
    size_t o = 0;
    for (int i = 0; i < count && o < n; i++) {
        int w = snprintf(buf + o, n - o, "%s%s", i ? ", " : "", names[i]);
        if (w < 0) break;
        o += (size_t)w;
    }
    return buf;
}

char *prs_infer_llm_names(char *buf, size_t n)
{
    const char *names[NLLMS];
    for (int i = 0; i < NLLMS; i++)
        names[i] = LLMS[i].name;
    return join(buf, n, names, NLLMS);
}

char *prs_infer_gpu_names(char *buf, size_t n)
{
    const char *names[NGPUS];
    for (int i = 0; i < NGPUS; i++)
        names[i] = GPUS[i].name;
    return join(buf, n, names, NGPUS);
}

const prs_infer_calib *prs_infer_calib_preset(const prs_infer_llm *m, const prs_infer_gpu *g)
{
    for (int im = 0; im < NLLMS; im++)
        for (int ig = 0; ig < NGPUS; ig++)
            if (m == &LLMS[im] && g == &GPUS[ig]) return &CALIBS[im][ig];
    return NULL;
}
