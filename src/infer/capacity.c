/* Capacity table (capacity.h): emulated Poisson probes, doubling then bisection on the rate. */
#include "capacity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define MIX_SAMPLE 200000

void prs_infer_cap_opts_default(prs_infer_cap_opts *o)
{
    *o = (prs_infer_cap_opts){.max_batched_tokens = 8192,
                              .probe_requests = 600,
                              .rel_tol = 0.03,
                              .max_clocks = 6,
                              .late_margin = 0.5,
                              .seed = 1};
}

static int cap_search(const prs_infer_perf *perf, const prs_infer_classes *classes,
                      const prs_infer_cap_opts *o, const prs_infer_trace *mix, int tp, int mhz,
                      prs_infer_cap *out, prs_error *err);

typedef struct probe_out {
    double late_share;
    double power_w;
} probe_out;

/* Emulate one instance under Poisson arrivals at rate_rps. */
static int probe_rate(const prs_infer_perf *perf, const prs_infer_classes *classes,
                      const prs_infer_cap_opts *o, const prs_infer_trace *mix, int tp, int mhz,
                      double rate_rps, probe_out *out, prs_error *err)
{
    prs_infer_trace load;
    int rc = prs_infer_trace_poisson(rate_rps, o->probe_requests / rate_rps, mix, 0, 0, o->seed,
                                     &load, err);
    if (rc) return rc;
    prs_infer_latency *lat = calloc(1, sizeof *lat);
    if (!lat) {
        prs_infer_trace_free(&load);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    prs_infer_engine *e = NULL;
    prs_infer_engine_cfg cfg = {.perf = perf,
                                .tp = tp,
                                .mhz = mhz,
                                .max_batched_tokens = o->max_batched_tokens,
                                .classes = classes,
                                .latency = lat};
    rc = prs_infer_engine_new(&cfg, 0, &e, err);
    for (size_t i = 0; !rc && i < load.n; i++) {
        const prs_infer_req *q = &load.reqs[i];
        while (!rc && prs_infer_engine_next_s(e) < q->arrival_s)
            rc = prs_infer_engine_advance(e, err);
        prs_infer_job j = {(uint32_t)i, q->in_tokens, q->out_tokens,
                           (uint8_t)prs_infer_class_of(classes, q->in_tokens, q->out_tokens),
                           q->arrival_s};
        if (!rc) rc = prs_infer_engine_submit(e, &j, q->arrival_s, err);
    }
    double end = load.n ? load.reqs[load.n - 1].arrival_s : 0;
    while (!rc && isfinite(prs_infer_engine_next_s(e))) {
        end = prs_infer_engine_next_s(e);
        rc = prs_infer_engine_advance(e, err);
    }
    if (!rc) {
        prs_infer_engine_flush(e, end);
        out->late_share = lat->done[PRS_INFER_ALL]
                              ? (double)lat->late[PRS_INFER_ALL] / (double)lat->done[PRS_INFER_ALL]
                              : 0;
        out->power_w = end > 0 ? prs_infer_engine_energy_j(e) / end : 0;
    }
    prs_infer_engine_free(e);
    free(lat);
    prs_infer_trace_free(&load);
    return rc;
}

/* The requests of mix that fit one instance's KV cache at tp; PRS_OK with fit->n == 0 when more
 * than (1 - quantile) of them do not (the configuration cannot serve the class). */
static int fitting(const prs_infer_perf *perf, const prs_infer_classes *classes,
                   const prs_infer_trace *mix, int tp, prs_infer_trace *fit, prs_error *err)
{
    memset(fit, 0, sizeof *fit);
    long kv;
    int mb;
    int rc = perf->capacity(perf->ctx, tp, &kv, &mb, err);
    if (rc) return rc;
    fit->reqs = malloc((mix->n ? mix->n : 1) * sizeof *fit->reqs);
    if (!fit->reqs) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (size_t i = 0; i < mix->n; i++)
        if (prs__infer_fits_kv(kv, mix->reqs[i].in_tokens, mix->reqs[i].out_tokens))
            fit->reqs[fit->n++] = mix->reqs[i];
    if ((double)(mix->n - fit->n) > (1 - classes->quantile) * (double)mix->n) fit->n = 0;
    return PRS_OK;
}

int prs__infer_cap_probe(const prs_infer_perf *perf, const prs_infer_classes *classes,
                         const prs_infer_cap_opts *o, const prs_infer_trace *all, int tp, int mhz,
                         prs_infer_cap *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = perf->idle_power(perf->ctx, tp, mhz, &out->idle_w, err);
    if (rc) return rc;
    prs_infer_trace fit;
    if ((rc = fitting(perf, classes, all, tp, &fit, err))) return rc;
    if (fit.n > 0) rc = cap_search(perf, classes, o, &fit, tp, mhz, out, err);
    prs_infer_trace_free(&fit);
    return rc;
}

static int cap_search(const prs_infer_perf *perf, const prs_infer_classes *classes,
                      const prs_infer_cap_opts *o, const prs_infer_trace *mix, int tp, int mhz,
                      prs_infer_cap *out, prs_error *err)
{
    int rc;
    double allowed = (1 - classes->quantile) * o->late_margin;
    probe_out p = {0, 0};
    /* Bracket from 1 request/s: doubling while feasible, or halving until feasible (down to a
     * request every 17 minutes: below that the configuration is taken as unusable). */
    double lo = 0, hi = 1;
    if ((rc = probe_rate(perf, classes, o, mix, tp, mhz, hi, &p, err))) return rc;
    if (p.late_share <= allowed) {
        for (int i = 0; p.late_share <= allowed; i++) {
            lo = hi;
            hi *= 2;
            if (i > 30) return prs_error_set(err, PRS_ERANGE, "capacity unbounded (TP %d)", tp);
            if ((rc = probe_rate(perf, classes, o, mix, tp, mhz, hi, &p, err))) return rc;
        }
    } else {
        for (int i = 0; i < 10 && lo == 0; i++) {
            double r = hi / 2;
            if ((rc = probe_rate(perf, classes, o, mix, tp, mhz, r, &p, err))) return rc;
            if (p.late_share <= allowed)
                lo = r;
            else
                hi = r;
        }
        if (lo == 0) return PRS_OK;
    }
    while (hi - lo > o->rel_tol * lo) {
        double mid = (lo + hi) / 2;
        if ((rc = probe_rate(perf, classes, o, mix, tp, mhz, mid, &p, err))) return rc;
        if (p.late_share > allowed)
            hi = mid;
        else
            lo = mid;
    }
    out->rate_rps = lo;
    for (int k = 0; k < PRS_INFER_POWER_POINTS; k++) {
        double r = lo * (k + 1) / PRS_INFER_POWER_POINTS;
        if ((rc = probe_rate(perf, classes, o, mix, tp, mhz, r, &p, err))) return rc;
        out->power_w[k] = p.power_w;
        /* Power is taken non-decreasing in the load (probe noise aside). */
        double prev = k ? out->power_w[k - 1] : out->idle_w;
        if (out->power_w[k] < prev) out->power_w[k] = prev;
    }
    return PRS_OK;
}

double prs_infer_cap_power(const prs_infer_cap *c, double rate_rps)
{
    if (!(c->rate_rps > 0) || rate_rps <= 0) return c->idle_w;
    double x = rate_rps / c->rate_rps * PRS_INFER_POWER_POINTS; /* 0..4 */
    if (x >= PRS_INFER_POWER_POINTS) return c->power_w[PRS_INFER_POWER_POINTS - 1];
    int k = (int)floor(x);
    double a = k == 0 ? c->idle_w : c->power_w[k - 1];
    return a + (c->power_w[k] - a) * (x - k);
}

/* The requests of one mix (class k, or all when k == PRS_INFER_NCLASS); a request at the middle
 * of the class's ranges when the trace has none. */
static int mix_of(const prs_infer_classes *c, const prs_infer_trace *trace, int k,
                  prs_infer_trace *mix, int *own, prs_error *err)
{
    memset(mix, 0, sizeof *mix);
    /* A long trace is sampled evenly: MIX_SAMPLE requests describe a length mix well enough. */
    size_t stride = trace->n / MIX_SAMPLE + 1, n = 0;
    for (size_t i = 0; i < trace->n; i += stride)
        n += k == PRS_INFER_NCLASS ||
             prs_infer_class_of(c, trace->reqs[i].in_tokens, trace->reqs[i].out_tokens) == k;
    mix->reqs = malloc((n ? n : 1) * sizeof *mix->reqs);
    if (!mix->reqs) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (size_t i = 0; i < trace->n; i += stride)
        if (k == PRS_INFER_NCLASS ||
            prs_infer_class_of(c, trace->reqs[i].in_tokens, trace->reqs[i].out_tokens) == k)
            mix->reqs[mix->n++] = trace->reqs[i];
    *own = n > 0;
    if (n == 0) {
        int lim_in[4] = {1, c->in_limit[0], c->in_limit[1], 2 * c->in_limit[1]};
        int lim_out[4] = {1, c->out_limit[0], c->out_limit[1], 2 * c->out_limit[1]};
        int i = k == PRS_INFER_NCLASS ? 1 : k / 3, o = k == PRS_INFER_NCLASS ? 1 : k % 3;
        mix->reqs[0] =
            (prs_infer_req){0, (lim_in[i] + lim_in[i + 1]) / 2, (lim_out[o] + lim_out[o + 1]) / 2};
        mix->n = 1;
    }
    return PRS_OK;
}

/* The backend's TPs, and up to max_clocks of its clocks spread evenly, the maximum included. */
static int pick_knobs(const prs_infer_perf *perf, const prs_infer_cap_opts *o,
                      prs_infer_captable *t, prs_error *err)
{
    const int *v;
    int n;
    if (perf->tps(perf->ctx, &v, &n) || n < 1 || n > PRS_INFER_MAX_TPS)
        return prs_error_set(err, PRS_EINVAL, "backend lists %d TP degrees (want 1..%d)", n,
                             PRS_INFER_MAX_TPS);
    memcpy(t->tps, v, (size_t)n * sizeof *v);
    t->n_tps = n;
    if (perf->clocks(perf->ctx, &v, &n) || n < 1)
        return prs_error_set(err, PRS_EINVAL, "backend lists no clock");
    int want = o->max_clocks < 1 ? 1 : o->max_clocks;
    if (want > PRS_INFER_MAX_CLOCKS) want = PRS_INFER_MAX_CLOCKS;
    if (want > n) want = n;
    for (int i = 0; i < want; i++) {
        int idx = want == 1 ? n - 1 : (int)lround((double)i * (n - 1) / (want - 1));
        if (t->n_clocks == 0 || v[idx] != t->clocks[t->n_clocks - 1])
            t->clocks[t->n_clocks++] = v[idx];
    }
    return PRS_OK;
}

int prs_infer_captable_build(const prs_infer_perf *perf, const prs_infer_classes *classes,
                             const prs_infer_cap_opts *o, const prs_infer_trace *trace,
                             prs_infer_captable *t, prs_error *err)
{
    memset(t, 0, sizeof *t);
    int rc = prs__infer_perf_check(perf, err);
    if (!rc) rc = pick_knobs(perf, o, t, err);
    for (int k = 0; !rc && k < PRS_INFER_MIXES; k++) {
        prs_infer_trace mix;
        if ((rc = mix_of(classes, trace, k, &mix, &t->has_mix[k], err))) break;
        for (int a = 0; !rc && a < t->n_tps; a++)
            for (int f = 0; !rc && f < t->n_clocks; f++)
                rc = prs__infer_cap_probe(perf, classes, o, &mix, t->tps[a], t->clocks[f],
                                          &t->cap[k][a][f], err);
        prs_infer_trace_free(&mix);
    }
    return rc;
}
