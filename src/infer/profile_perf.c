/* The performance backend (perf.h) of a loaded inference profile: the tables of profile_build.c
 * read back by bilinear interpolation over (batch, tokens per sequence).
 *
 * Why bilinear: a prefill costs about a + b·batch·tokens (plus attention, quadratic in tokens but
 * small up to a few thousand tokens) and a decode step about a + b·batch + c·batch·tokens, both
 * exact or close to it under bilinear interpolation, so a coarse sweep (batch 1..64 by powers of
 * two, tokens by powers of two) is enough. Below the smallest measured tokens value the cost of
 * that value is used (an upper bound, since cost grows with tokens); above the largest, the last
 * segment is extended (its slope at least 0, so noise cannot make a cost fall), up to
 * PRS_INFER_PROFILE_MAX_EXTRAP times the largest. A batch outside the measured ones, a tp or a
 * clock the file lacks are refused with a message naming them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "profile_int.h"

/* Index i with v[i] <= x <= v[i+1] (the last segment when x is past the end), and the weight of
 * v[i+1]; n == 1 gives (0, 0). */
static void segment_long(const long *v, int n, double x, int *i, double *u)
{
    *i = 0;
    *u = 0;
    if (n < 2) return;
    int k = 0;
    while (k < n - 2 && x > (double)v[k + 1])
        k++;
    *i = k;
    *u = (x - (double)v[k]) / (double)(v[k + 1] - v[k]);
}

static void segment_int(const int *v, int n, double x, int *i, double *u)
{
    *i = 0;
    *u = 0;
    if (n < 2) return;
    int k = 0;
    while (k < n - 2 && x > (double)v[k + 1])
        k++;
    *i = k;
    *u = (x - (double)v[k]) / (double)(v[k + 1] - v[k]);
}

/* Value of the table at batch row ib, tokens weight (is, v); past the last point (v > 1) the
 * slope of the last segment is taken as at least 0. */
static double along_tokens(const double *tab, int ns, int ib, int is, double v)
{
    const double *r = tab + (size_t)ib * (size_t)ns;
    if (ns < 2) return r[0];
    double a = r[is], b = r[is + 1];
    if (v > 1 && b < a) return b;
    return a + v * (b - a);
}

int prs__infer_grid_eval(const prs__infer_grid *g, int batch, double tokens, const char *what,
                         double *time_s, double *energy_j, prs_error *err)
{
    if (batch < g->batch[0] || batch > g->batch[g->nb - 1])
        return prs_error_set(err, PRS_ERANGE, "%s: batch %d outside the measured %d..%d", what,
                             batch, g->batch[0], g->batch[g->nb - 1]);
    double top = (double)g->tokens[g->ns - 1];
    if (!(tokens <= top * PRS_INFER_PROFILE_MAX_EXTRAP) || (g->ns < 2 && tokens > top))
        return prs_error_set(err, PRS_ERANGE,
                             "%s: %.0f tokens per sequence beyond what the profile covers (%ld "
                             "measured; at most %g times that extrapolated)",
                             what, tokens, g->tokens[g->ns - 1], PRS_INFER_PROFILE_MAX_EXTRAP);
    if (tokens < (double)g->tokens[0]) tokens = (double)g->tokens[0];
    int ib, is;
    double u, v;
    segment_int(g->batch, g->nb, batch, &ib, &u);
    segment_long(g->tokens, g->ns, tokens, &is, &v);
    int ib2 = g->nb < 2 ? ib : ib + 1;
    double t0 = along_tokens(g->time_s, g->ns, ib, is, v);
    double t1 = along_tokens(g->time_s, g->ns, ib2, is, v);
    double e0 = along_tokens(g->energy_j, g->ns, ib, is, v);
    double e1 = along_tokens(g->energy_j, g->ns, ib2, is, v);
    *time_s = t0 + u * (t1 - t0);
    *energy_j = e0 + u * (e1 - e0);
    return PRS_OK;
}

/* ---- the backend ---- */

static int find_index(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return i;
    return -1;
}

/* The (tp, clock) point, or NULL with a message naming what the profile lacks. */
static const prs__infer_point *find_point(const prs_infer_profile *p, int tp, int mhz,
                                          prs_error *err)
{
    int itp = find_index(p->tps, p->ntp, tp);
    if (itp < 0) {
        prs_error_set(err, PRS_ERANGE, "profile %s on %s: no data for tp %d", p->model, p->gpu, tp);
        return NULL;
    }
    int ic = find_index(p->clocks, p->nclk, mhz);
    if (ic < 0) {
        prs_error_set(err, PRS_ERANGE,
                      "profile %s on %s: no data at %d MHz (measured %d..%d MHz, %d clocks)",
                      p->model, p->gpu, mhz, p->clocks[0], p->clocks[p->nclk - 1], p->nclk);
        return NULL;
    }
    return &p->pts[itp * p->nclk + ic];
}

static int phase_eval(void *ctx, int phase, int tp, int mhz, int n_seqs, double tokens,
                      double *time_s, double *energy_j, prs_error *err)
{
    const prs_infer_profile *p = ctx;
    const prs__infer_point *pt = find_point(p, tp, mhz, err);
    if (!pt) return PRS_ERANGE;
    const char *name = prs__infer_phase_name(phase);
    if (n_seqs < 1 || !(tokens >= 0))
        return prs_error_set(err, PRS_EINVAL, "tp %d at %d MHz, %s: %d sequences of %.0f tokens",
                             tp, mhz, name, n_seqs, tokens);
    /* The message names the point only when there is one to write: this runs for every
     * iteration the emulator replays (formatting it each time was a quarter of a replay). */
    int rc =
        prs__infer_grid_eval(&pt->phase[phase], n_seqs, tokens / n_seqs, "", time_s, energy_j, err);
    if (rc && err) {
        char msg[PRS_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        prs_error_set(err, rc, "tp %d at %d MHz, %s%s", tp, mhz, name, msg);
    }
    return rc;
}

static int cb_prefill(void *ctx, int tp, int mhz, const prs_infer_prefill *it, double *time_s,
                      double *energy_j, prs_error *err)
{
    return phase_eval(ctx, PRS__INFER_PREFILL, tp, mhz, it->n_seqs, (double)it->tokens, time_s,
                      energy_j, err);
}

static int cb_decode(void *ctx, int tp, int mhz, const prs_infer_decode *it, double *time_s,
                     double *energy_j, prs_error *err)
{
    return phase_eval(ctx, PRS__INFER_DECODE, tp, mhz, it->n_seqs, (double)it->ctx_tokens, time_s,
                      energy_j, err);
}

static int cb_idle_power(void *ctx, int tp, int mhz, double *power_w, prs_error *err)
{
    const prs__infer_point *pt = find_point(ctx, tp, mhz, err);
    if (!pt) return PRS_ERANGE;
    *power_w = pt->idle_power_w;
    return PRS_OK;
}

static int cb_capacity(void *ctx, int tp, long *kv_tokens, int *max_batch, prs_error *err)
{
    const prs_infer_profile *p = ctx;
    int itp = find_index(p->tps, p->ntp, tp);
    if (itp < 0)
        return prs_error_set(err, PRS_ERANGE, "profile %s on %s: no data for tp %d", p->model,
                             p->gpu, tp);
    *kv_tokens = p->kv_tokens[itp];
    *max_batch = p->max_batch[itp];
    return PRS_OK;
}

static int cb_clocks(void *ctx, const int **mhz, int *n)
{
    const prs_infer_profile *p = ctx;
    *mhz = p->clocks;
    *n = p->nclk;
    return PRS_OK;
}

static int cb_tps(void *ctx, const int **tp, int *n)
{
    const prs_infer_profile *p = ctx;
    *tp = p->tps;
    *n = p->ntp;
    return PRS_OK;
}

void prs_infer_profile_perf(const prs_infer_profile *p, prs_infer_perf *out)
{
    /* The callbacks only read the profile; ctx is void * by the table's contract. */
    out->ctx = (void *)(uintptr_t)p;
    out->prefill = cb_prefill;
    out->decode = cb_decode;
    out->idle_power = cb_idle_power;
    out->capacity = cb_capacity;
    out->clocks = cb_clocks;
    out->tps = cb_tps;
}
