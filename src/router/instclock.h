/* DynamoLLM's instance level on a live instance (instclock.c): from the load a serving engine
 * reports on its Prometheus page (requests running and waiting, KV cache in use), the lowest SM
 * clock at which the inference cost model still meets the latency SLOs, and the reading of that
 * page.
 *
 * The rule, at clock f (the candidates: the GPU's range in PRS_INSTCLOCK_STEP_MHZ steps):
 *   decode: one decode step of the running batch (at least 1 sequence, each at the batch's mean
 *           context, from the KV cache in use) takes at most headroom x the TBT SLO, less the
 *           share of the time prefills take (the prompt rate times a prompt token's prefill
 *           time): the running requests wait while a new prompt is prefilled;
 *   prefill: the prefill of the waiting prompts and one more (prompt_tokens each), then one
 *           decode step, takes at most headroom x the TTFT SLO; and the same for each further
 *           target (its prompt length, its TTFT SLO).
 * The lowest f meeting both; the highest clock when none does (the SLO is then out of reach,
 * and the fastest clock is the least late). */
#ifndef PRS_ROUTER_INSTCLOCK_H
#define PRS_ROUTER_INSTCLOCK_H

#include <stddef.h>

#include "perseus/error.h"
#include "roofline.h"

#define PRS_INSTCLOCK_STEP_MHZ 15 /* candidate clocks: NVIDIA's SM clock step */

/* An instance's load as its engine reports it. */
typedef struct prs_instclock_load {
    double running, waiting; /* requests */
    double kv_usage;         /* share of the KV cache in use, 0..1 */
    double prompt_tokens;    /* prompt tokens processed so far (a counter); -1: not reported */
    double prompt_rate;      /* prompt tokens a second arriving lately (0: not known) */
} prs_instclock_load;

#define PRS_INSTCLOCK_MAX_TARGETS 8

typedef struct prs_instclock_slo {
    double ttft_s, tbt_s; /* the SLOs the instance's pool must meet */
    double headroom;      /* share of each SLO the model may use, (0, 1] */
    long prompt_tokens;   /* a typical prompt of the pool */
    /* Further prompts and their TTFT SLOs, each to be met as ttft_s is for prompt_tokens (a pool
     * serving several input classes: each class's long prompt within its own SLO). */
    int ntargets;
    long target_tokens[PRS_INSTCLOCK_MAX_TARGETS];
    double target_ttft_s[PRS_INSTCLOCK_MAX_TARGETS];
} prs_instclock_slo;

/* The clock (MHz) for load on an instance of model at tp. PRS_EINVAL when an SLO, the headroom,
 * a prompt length or the number of targets is out of range, or tp leaves no room for the
 * weights. */
int prs__instclock_pick(const prs_infer_roofline *model, int tp, const prs_instclock_slo *slo,
                        const prs_instclock_load *load, int *mhz, prs_error *err);

/* Read the load from a Prometheus text page (text[len]): the sums over every series of
 * vllm:num_requests_running, vllm:num_requests_waiting and vllm:gpu_cache_usage_perc (vLLM's
 * names; later versions' vllm:kv_cache_usage_perc too), and vllm:prompt_tokens_total when
 * present (else prompt_tokens is -1; prompt_rate is left 0, the caller's to fill). PRS_EPARSE when
 * the running gauge is absent or a value is not a finite number >= 0. */
int prs__instclock_parse_metrics(const char *text, size_t len, prs_instclock_load *out,
                                 prs_error *err);

#endif
