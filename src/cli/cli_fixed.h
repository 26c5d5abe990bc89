/* A fixed serving cluster emulated as the live one runs (cli_fixed.c): the instances, pools, TP
 * degrees and clocks of a router configuration (docs/router.md), requests routed by the router's
 * own rule (router_pick.h) and, with an instance period, each instance's clock chosen by the
 * rule perseus-instclock applies (instclock.h), on the roofline cost model perseus-fakeserve
 * runs on. Shared by `perseus infer emulate --cluster` and `perseus demo --inference --compare`.
 */
#ifndef PRS_CLI_FIXED_H
#define PRS_CLI_FIXED_H

#include "fixed.h"
#include "instclock.h"
#include "router_config.h"
#include "trace.h"

typedef struct prs_cli_fixed {
    long max_batched_tokens;  /* prefill token budget (a fake's --max-batched-tokens; 8192) */
    double instance_period_s; /* 0: every instance at its configured clock */
    double headroom;          /* the instance level's share of each SLO (0.6) */
} prs_cli_fixed;

void prs_cli_fixed_default(prs_cli_fixed *o);

/* What the instance level plans pool p for (the inference demo's controllers do the same): one
 * target per input class served by the pool (a class of that input length maps to p): the 99th
 * percentile prompt of the trace's requests of the class (without any, its upper bound, or
 * twice the medium bound for long prompts) within the class's TTFT SLO; the first as the
 * prompt_tokens / ttft_s pair, the others as targets; TBT SLO and headroom as given. 0 when the
 * pool serves no input class (then perseus-instclock's defaults: 512 tokens within 0.5 s). */
int prs_cli_pool_slo(const prs_infer_trace *t, const prs_infer_classes *c, const int *pool_of_class,
                     int pool, double headroom, prs_instclock_slo *slo);

/* Replay t on cfg's cluster, each instance batching at most its max_running sequences (the
 * router's in-flight limit: the inference demo gives its fakes the same --max-running). PRS_EINVAL
 * when the cluster has more instances than the emulator takes; the emulator's errors otherwise. */
int prs_cli_fixed_run(const prs_router_config *cfg, const prs_infer_trace *t,
                      const prs_cli_fixed *o, prs_infer_fixed_result *out, prs_error *err);

/* The share (%) of the trace's requests on time (rejected ones are not). */
double prs_cli_fixed_slo_pct(const prs_infer_fixed_result *r);

#endif
