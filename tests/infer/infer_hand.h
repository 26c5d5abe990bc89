/* A performance backend simple enough to compute the emulator's results by hand (shared by the
 * tests of src/infer): times linear in tokens and sequences, scaled by fmax/f, constant power.
 *   prefill: (pf_base_s + pf_per_token_s * tokens) * fmax/f, at busy_w
 *   decode:  (dc_base_s + dc_per_seq_s * n_seqs + dc_per_ctx_s * ctx) * fmax/f, at busy_w
 *            (a share dc_mem_share of it bound by memory: that share does not scale with f)
 *   idle:    idle_w
 * with busy_w += busy_w_per_mhz * (f - fmin); at TP t times are multiplied by (8/t)^tp_alpha
 * and powers by t/8 (so TP 8 gives the figures as written), and the KV capacity by t/8. */
#ifndef PRS_TEST_INFER_HAND_H
#define PRS_TEST_INFER_HAND_H

#include <math.h>

#include "perf.h"

typedef struct hand_model {
    double pf_base_s, pf_per_token_s;
    double dc_base_s, dc_per_seq_s, dc_per_ctx_s;
    double busy_w, idle_w;
    double busy_w_per_mhz; /* busy power += this * (f - fmin) */
    double tp_alpha;       /* times scale as (8/tp)^tp_alpha (0: 1) */
    double dc_mem_share;   /* share of a decode step's time that does not scale with f (0) */
    long kv_tokens;
    int max_batch;
    int clocks[4], n_clocks;
    int tps[3], n_tps;
} hand_model;

static double hand_speed(const hand_model *m, int tp, int mhz)
{
    double alpha = m->tp_alpha > 0 ? m->tp_alpha : 1;
    return ((double)m->clocks[m->n_clocks - 1] / mhz) * pow(8.0 / tp, alpha);
}

static double hand_power(const hand_model *m, int tp, int mhz)
{
    return (m->busy_w + m->busy_w_per_mhz * (mhz - m->clocks[0])) * tp / 8.0;
}

static int hand_prefill(void *ctx, int tp, int mhz, const prs_infer_prefill *it, double *t,
                        double *j, prs_error *err)
{
    (void)err;
    const hand_model *m = ctx;
    *t = (m->pf_base_s + m->pf_per_token_s * (double)it->tokens) * hand_speed(m, tp, mhz);
    *j = *t * hand_power(m, tp, mhz);
    return 0;
}

static int hand_decode(void *ctx, int tp, int mhz, const prs_infer_decode *it, double *t, double *j,
                       prs_error *err)
{
    (void)err;
    const hand_model *m = ctx;
    double clock = (double)m->clocks[m->n_clocks - 1] / mhz;
    double slow = (1 - m->dc_mem_share) * clock + m->dc_mem_share;
    *t = (m->dc_base_s + m->dc_per_seq_s * it->n_seqs + m->dc_per_ctx_s * (double)it->ctx_tokens) *
         hand_speed(m, tp, mhz) / clock * slow;
    *j = *t * hand_power(m, tp, mhz);
    return 0;
}

static int hand_idle(void *ctx, int tp, int mhz, double *p, prs_error *err)
{
    (void)err;
    (void)mhz;
    const hand_model *m = ctx;
    *p = m->idle_w * tp / 8.0;
    return 0;
}

static int hand_capacity(void *ctx, int tp, long *kv, int *mb, prs_error *err)
{
    (void)err;
    const hand_model *m = ctx;
    *kv = m->kv_tokens * tp / 8;
    *mb = m->max_batch;
    return 0;
}

static int hand_clocks(void *ctx, const int **mhz, int *n)
{
    hand_model *m = ctx;
    *mhz = m->clocks;
    *n = m->n_clocks;
    return 0;
}

static int hand_tps(void *ctx, const int **tp, int *n)
{
    hand_model *m = ctx;
    *tp = m->tps;
    *n = m->n_tps;
    return 0;
}

static prs_infer_perf hand_perf(hand_model *m)
{
    return (prs_infer_perf){m,           hand_prefill, hand_decode, hand_idle, hand_capacity,
                            hand_clocks, hand_tps};
}

#endif
