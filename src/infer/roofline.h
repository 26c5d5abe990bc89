/* The synthetic inference model: a roofline-style cost of one prefill or decode iteration of a
 * dense transformer served with tensor parallelism, at a given SM clock, and its energy from
 * per-phase power curves built on the GPU model (perseus/gpumodel.h). Formulas and the
 * calibration in docs/inference.md ("The synthetic model").
 *
 * At SM clock f (k = f_max / f), TP degree p, weights W = params x bytes_per_param bytes:
 *   prefill of b prompts of s tokens (n = b s):
 *     t = (2 P n + 2 L h b s^2) k / (p peak eta_prefill(n))        compute, attention included
 *       + W / (p bw eta_mem)                                      the weights read once
 *       + 2 L (2 (p-1)/p) 2 h n / ar_bw_prefill                  all-reduce volume
 *       + (t_prefill0 + 2 L ar_lat log2 p) (1 - beta + beta k)    fixed costs and all-reduce
 * latency decode step of b sequences at context c: t = (2 P b + 4 L h b c) k / (p peak eta_decode)
 *       + (W + b c kv_bytes) / (p bw eta_mem)
 *       + 2 L (2 (p-1)/p) 2 h b / ar_bw_decode
 *       + (t_decode0 + 2 L ar_lat log2 p) (1 - beta + beta k)
 * beta is the share of the fixed costs that runs at the SM clock (small kernels, all-reduce
 * latency on the SMs), a choice (PRS_INFER_FIXED_CLOCK_SHARE): the measurements behind the
 * calibration are all at the default clock. Energies are power x time x p with, per GPU,
 *   P_prefill(f) = min(P_gpu(f), prefill_w)         P_gpu: the GPU model's busy power
 *   P_decode(f)  = idle_w + (P_prefill(f) - idle_w) (decode_w - idle_w) / (P_prefill(f_max) -
 * idle_w) P_idle       = idle_w. */
#ifndef PRS_INFER_ROOFLINE_H
#define PRS_INFER_ROOFLINE_H

#include "perseus/error.h"
#include "perseus/gpumodel.h"

/* Share of the fixed per-iteration costs that runs at the SM clock (beta above): a choice, half
 * way between launch-bound (CPU, none) and SM-bound (all); no public measurement separates them. */
#define PRS_INFER_FIXED_CLOCK_SHARE 0.3
/* The prefill's compute efficiency steps from eta_prefill down to eta_prefill_long when an
 * iteration holds more tokens than the knee: the measurements show every model on every GPU
 * getting about twice as costly per token between 2048 and 4096 tokens (activations that no
 * longer stay in the L2 cache, larger GEMM tiles). eta(n) = eta_long + (eta - eta_long) /
 * (1 + (n / knee)^8): within 4 % of eta below 2048 tokens, of eta_long above 4096. */
#define PRS_INFER_PREFILL_KNEE_TOKENS 3072.0

/* KV capacity: the share of GPU memory a serving engine takes (vLLM's default
 * gpu_memory_utilization) and what it keeps per GPU for activations and its own buffers. */
#define PRS_INFER_MEM_UTIL 0.9
#define PRS_INFER_ACT_RESERVE_BYTES 2.0e9
/* The most sequences an instance runs at once (vLLM's default max_num_seqs). */
#define PRS_INFER_MAX_SEQS 256

/* A dense transformer, from its public architecture. */
typedef struct prs_infer_llm {
    const char *name;          /* "llama2-70b" */
    int layers;                /* L */
    int hidden;                /* h, model width */
    double params;             /* P, parameters */
    double bytes_per_param;    /* 2 for fp16/bf16 weights */
    double kv_bytes_per_token; /* KV cache stored per token, all layers (K and V) */
} prs_infer_llm;

/* A GPU, from its spec sheet, and its per-phase power figures (per GPU). */
typedef struct prs_infer_gpu {
    const char *name;                   /* "h100" */
    const char *power_preset;           /* the GPU model's preset for the clock-power curve */
    double peak_flops;                  /* dense fp16/bf16 tensor FLOP/s at f_max */
    double mem_bw_bps;                  /* HBM bytes/s */
    double mem_bytes;                   /* HBM bytes */
    int f_min_mhz, f_max_mhz;           /* the clock range offered to a sweep */
    double idle_w, decode_w, prefill_w; /* per-phase power at f_max */
} prs_infer_gpu;

/* Efficiencies and fixed costs of one (model, GPU), fitted on measurements (calib.c). */
typedef struct prs_infer_calib {
    double eta_prefill, eta_decode, eta_mem; /* shares of peak compute and memory bandwidth */
    double eta_prefill_long;                 /* eta_prefill past the knee (see above) */
    double t_prefill0_s, t_decode0_s;        /* fixed time per iteration */
    double t_prefill_seq_s;                  /* prefill time per prompt of the batch */
    double ar_bw_prefill, ar_bw_decode;      /* effective all-reduce bandwidth, bytes/s */
    double ar_bw_prefill_long;               /* ar_bw_prefill past the knee */
    double ar_lat_prefill_s;                 /* ar_lat_s of the prefill's all-reduces */
    double ar_lat_s;                         /* all-reduce latency per log2(p) step */
} prs_infer_calib;

/* The built-in models ("llama2-70b", "bloom-176b") and GPUs ("a100", "h100"); lookups ignore
 * ASCII case; NULL when unknown. names() writes "a, b" into buf. */
const prs_infer_llm *prs_infer_llm_find(const char *name);
const prs_infer_gpu *prs_infer_gpu_find(const char *name);
char *prs_infer_llm_names(char *buf, size_t n);
char *prs_infer_gpu_names(char *buf, size_t n);
/* The calibrated constants of (model, gpu), NULL when none (roofline_presets.c). */
const prs_infer_calib *prs_infer_calib_preset(const prs_infer_llm *m, const prs_infer_gpu *g);

/* One instance's model: all three must be set; power is the GPU model's preset. */
typedef struct prs_infer_roofline {
    const prs_infer_llm *llm;
    const prs_infer_gpu *gpu;
    prs_infer_calib calib;
    const prs_gpu_preset *power;
} prs_infer_roofline;

/* Fill r for (m, g) with the calibrated preset; PRS_EINVAL when there is none. */
int prs_infer_roofline_init(prs_infer_roofline *r, const prs_infer_llm *m, const prs_infer_gpu *g,
                            prs_error *err);

/* Time and energy of a prefill of batch prompts of tokens tokens each, and of a decode step of
 * batch sequences at a context of tokens each, at tp and mhz (> 0). Pure arithmetic: no range
 * check beyond positivity (the callers check the clock range and capacity). */
void prs_infer_roofline_prefill(const prs_infer_roofline *r, int tp, double mhz, double batch,
                                double tokens, double *time_s, double *energy_j);
void prs_infer_roofline_decode(const prs_infer_roofline *r, int tp, double mhz, double batch,
                               double tokens, double *time_s, double *energy_j);
/* Power of an idle instance (all tp GPUs). */
double prs_infer_roofline_idle_w(const prs_infer_roofline *r, int tp);
/* KV cache tokens an instance holds at tp: PRS_INFER_MEM_UTIL of its memory less the weights'
 * shards and PRS_INFER_ACT_RESERVE_BYTES per GPU, over kv_bytes_per_token. PRS_EINVAL (message
 * naming the model, GPU and tp) when the weights leave no room. */
int prs_infer_roofline_kv_tokens(const prs_infer_roofline *r, int tp, long *kv_tokens,
                                 prs_error *err);

#endif
