/* One serving instance: iteration-level continuous batching as vLLM's scheduler runs it
 * without chunked prefill (engine.c).
 *
 * Requests wait in a FCFS queue. When an iteration ends the next one is a prefill of as many
 * waiting requests, from the head, as fit the token budget (max_batched_tokens; a prompt longer
 * than the budget runs alone), the largest batch and the free KV blocks (16 tokens each, less a
 * 1 % watermark); if none fits, one decode step of every running sequence. A decode step that
 * needs more blocks than are free preempts the most recently admitted running sequence
 * (recompute: its blocks are freed and it goes back to the head of the queue, to be prefilled
 * again over its prompt and the tokens it had generated).
 *
 * The figures of each iteration come from the performance backend (perf.h): its energy is
 * metered over the iteration, and the idle power over the gaps between iterations. A prefill
 * produces each admitted request's next token (its first, or the one after a preemption); a
 * decode step one token of each running sequence. Per-sequence work is done only when a
 * sequence is admitted, preempted or finishes: the decode step itself is O(classes), because
 * sequences are kept in aggregate (a finish heap keyed by decode step, block-boundary counts by
 * phase modulo 16), so a week of iterations replays in minutes; runs of decode steps (below)
 * are one event each to the cluster. */
#ifndef PRS_INFER_ENGINE_H
#define PRS_INFER_ENGINE_H

#include <stdint.h>

#include "perf.h"
#include "stats.h"

#define PRS_INFER_KV_BLOCK_TOKENS 16
#define PRS_INFER_KV_WATERMARK 0.01 /* share of the blocks a prefill leaves free (vLLM's) */

/* A request as the engine sees it. */
typedef struct prs_infer_job {
    uint32_t id; /* the caller's (a trace index) */
    int32_t in_tokens;
    int32_t out_tokens;
    uint8_t klass;    /* its true class, for the statistics */
    double arrival_s; /* when it reached the cluster (TTFT counts from here) */
} prs_infer_job;

/* Optional per-token observer (tests, detailed output): called for each token of each request
 * with its index (1 = first) and time. Costs O(batch) a decode step when set. */
typedef void (*prs_infer_token_fn)(void *ud, uint32_t id, int token, double t_s);

typedef struct prs_infer_engine prs_infer_engine;

typedef struct prs_infer_engine_cfg {
    const prs_infer_perf *perf;
    int tp, mhz;
    long max_batched_tokens; /* prefill token budget */
    const prs_infer_classes *classes;
    prs_infer_latency *latency;  /* where TTFT, TBT and lateness go (may be NULL) */
    prs_infer_meter *meter;      /* where energy goes (may be NULL) */
    prs_infer_token_fn on_token; /* may be NULL */
    void *on_token_ud;
    int max_run_steps; /* decode steps computed ahead at once (<= 1: one at a time) */
} prs_infer_engine_cfg;

/* A new idle engine at time now_s. Asks the backend its KV capacity and largest batch at tp. */
int prs_infer_engine_new(const prs_infer_engine_cfg *cfg, double now_s, prs_infer_engine **out,
                         prs_error *err);
void prs_infer_engine_free(prs_infer_engine *e);

/* Queue a request at now_s (>= the last event's time). An idle engine starts its next
 * iteration when advanced at prs_infer_engine_next_s (now_s, or the end of a pause): requests
 * submitted at the same instant before that share the prefill. PRS_EINVAL when the request
 * can never fit the KV cache. */
int prs_infer_engine_submit(prs_infer_engine *e, const prs_infer_job *job, double now_s,
                            prs_error *err);
/* End time of the running iteration; when idle with work, the time its next iteration starts;
 * INFINITY when idle with nothing to do. */
double prs_infer_engine_next_s(const prs_infer_engine *e);
/* At prs_infer_engine_next_s: finish the running iteration, if any, and start the next one if
 * there is work. An error of the backend or a sequence alone too large for the KV cache fails. */
int prs_infer_engine_advance(prs_infer_engine *e, prs_error *err);
/* Decode runs. While nothing changes (no arrival, no sequence finishing, no preemption, no
 * decision of the policy), the decode steps that follow one another are computed together, up to
 * max_run_steps, and the engine's next event is the end of the last: one event for many steps.
 * Each step keeps its own figures (the backend's at its batch and context) and is applied to the
 * state (tokens, gaps, energy, blocks) exactly as if run alone; a submit or a clock change at
 * now_s ends the run with the step in progress then, so the results are those of stepping one
 * step at a time. The state a caller reads between events is that of now_s only after
 * prs_infer_engine_sync(e, now_s), which applies the steps that ended before now_s. No step of
 * a run starts at or after the horizon (the policy's next decision: its clock and limits apply
 * to the steps after it); INFINITY by default. */
void prs_infer_engine_sync(prs_infer_engine *e, double now_s);
void prs_infer_engine_set_horizon(prs_infer_engine *e, double until_s);

/* Account idle energy up to now_s (call at the end of the replay or before reading energy). */
void prs_infer_engine_flush(prs_infer_engine *e, double now_s);

/* The SM clock of the iterations started from now_s on (idle time before now_s is charged at
 * the previous clock's idle power). */
int prs_infer_engine_set_clock(prs_infer_engine *e, int mhz, double now_s, prs_error *err);
int prs_infer_engine_clock(const prs_infer_engine *e);
/* Phase-aware clocks: decode steps started from now on run at min(mhz, the clock above), prefills
 * at the clock above; 0 makes decode steps follow it again. The switch between the two is taken
 * as free (the clocks are set between iterations). */
void prs_infer_engine_set_decode_clock(prs_infer_engine *e, int mhz);
int prs_infer_engine_decode_clock(const prs_infer_engine *e);
/* A power limit for the instance's iterations (all its GPUs, W; 0: none): an iteration whose
 * mean power at the engine's clock would exceed it runs at the highest lower clock of the backend
 * whose power fits (the lowest when none does), as a GPU under a power cap lowers its clock. */
void prs_infer_engine_set_power_limit(prs_infer_engine *e, double power_w);
/* Iterations that drew more than the limit even at the lowest clock. */
long prs_infer_engine_over_limit(const prs_infer_engine *e);
/* The running sequences and the sum of their contexts (the next decode step's size). */
void prs_infer_engine_running(const prs_infer_engine *e, int *n_seqs, long *ctx_tokens);
int prs_infer_engine_tp(const prs_infer_engine *e);
/* No iteration starts before until_s (a reconfiguration pause); the time counts as idle. */
void prs_infer_engine_pause(prs_infer_engine *e, double until_s);

/* 1 when a request of in + out tokens fits a KV cache of kv_tokens (less the watermark). */
int prs__infer_fits_kv(long kv_tokens, int in_tokens, int out_tokens);
/* 1 when the request fits this engine's KV cache (else submit refuses it). */
int prs_infer_engine_fits(const prs_infer_engine *e, int in_tokens, int out_tokens);

/* Requests queued or running, and the prompt+output tokens they still hold or need. */
long prs_infer_engine_outstanding(const prs_infer_engine *e);
long prs_infer_engine_outstanding_tokens(const prs_infer_engine *e);
double prs_infer_engine_energy_j(const prs_infer_engine *e);
long prs_infer_engine_preemptions(const prs_infer_engine *e);
/* Prompt tokens prefilled so far, recomputed ones included (an engine's prompt token counter). */
long prs_infer_engine_prompt_tokens(const prs_infer_engine *e);
/* Waiting time of the request at the head of the queue at now_s (0 when none). */
double prs_infer_engine_head_wait_s(const prs_infer_engine *e, double now_s);

#endif
