/* The inference performance interface: what the serving emulator and the policies ask of a
 * model of one serving instance (one engine on TP GPUs at one SM clock).
 *
 * The engine is modelled at iteration level, as vLLM's scheduler runs it without chunked
 * prefill: an iteration is either a prefill of a batch of prompts or one decode step of every
 * running sequence. A backend answers the time and energy of one such iteration; the emulator
 * never sees where the figures come from (a phase-level profile CSV, a roofline model, or a
 * hand-written model in a test). Backends sit behind a table of functions (prs_infer_perf).
 *
 * Units: seconds, joules, watts, MHz, tokens. Energies and powers cover all TP GPUs of the
 * instance together. */
#ifndef PRS_INFER_PERF_H
#define PRS_INFER_PERF_H

#include "perseus/error.h"

/* One prefill iteration: n_seqs prompts whose lengths sum to tokens. */
typedef struct prs_infer_prefill {
    int n_seqs;
    long tokens;
} prs_infer_prefill;

/* One decode step: n_seqs running sequences each producing one token; ctx_tokens is the sum of
 * their context lengths (prompt + tokens generated so far), the KV cache read by the step. */
typedef struct prs_infer_decode {
    int n_seqs;
    long ctx_tokens;
} prs_infer_decode;

/* A backend. ctx is the backend's own state. Every callback returns 0 or a negative PRS_E*
 * code with a message in err (for instance a TP or clock the backend has no data for). */
typedef struct prs_infer_perf {
    void *ctx;
    /* Time and energy of one prefill iteration at (tp, mhz). */
    int (*prefill)(void *ctx, int tp, int mhz, const prs_infer_prefill *it, double *time_s,
                   double *energy_j, prs_error *err);
    /* Time and energy of one decode step at (tp, mhz). */
    int (*decode)(void *ctx, int tp, int mhz, const prs_infer_decode *it, double *time_s,
                  double *energy_j, prs_error *err);
    /* Power of the instance when it holds no request, at (tp, mhz). */
    int (*idle_power)(void *ctx, int tp, int mhz, double *power_w, prs_error *err);
    /* Tokens of KV cache the instance can hold at tp (GPU memory less the weights' shard and
     * the engine's reserve), and the largest batch the engine runs. */
    int (*capacity)(void *ctx, int tp, long *kv_tokens, int *max_batch, prs_error *err);
    /* The SM clocks (MHz, ascending) and TP degrees (ascending) the backend covers; pointers
     * into the backend, valid while it lives. */
    int (*clocks)(void *ctx, const int **mhz, int *n);
    int (*tps)(void *ctx, const int **tp, int *n);
} prs_infer_perf;

/* PRS_EINVAL when p lacks a callback (perf.c). */
int prs__infer_perf_check(const prs_infer_perf *p, prs_error *err);
/* 1 when one iteration's figures can be used: finite, time > 0, energy >= 0. */
int prs__infer_perf_figures_ok(double time_s, double energy_j);

#endif
