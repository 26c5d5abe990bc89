/* Trace transforms (trace.h): rate scaling, a time window, tiling into days with a diurnal
 * swing, and the peak rate.
 *
 * Rate scaling duplicates or thins requests in place of compressing time: compressing an hour
 * 10x would leave six minutes, too short for the 30-minute cluster period the policies plan
 * over. Copies of a request are spread over the gap to the next arrival, so the local rate
 * follows the trace's (a burst stays a burst, but no artificial pile-up at one instant). Every
 * choice is arithmetic or a hash of the request's index: the same arguments give the same
 * trace. */
#include "trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The trace's period when tiled or wrapped: its last arrival plus one mean gap, so the seam
 * between two copies looks like any other gap. */
static double tile_period_s(const prs_infer_trace *in)
{
    double last = in->reqs[in->n - 1].arrival_s;
    return in->n > 1 ? last + last / (double)(in->n - 1) : 1.0;
}

static int alloc_reqs(prs_infer_trace *out, double n, prs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!(n <= (double)PRS_INFER_TRACE_MAX_REQS))
        return prs_error_set(err, PRS_ERANGE, "trace of %.0f requests exceeds the bound %ld", n,
                             PRS_INFER_TRACE_MAX_REQS);
    size_t cap = n < 1 ? 1 : (size_t)n;
    out->reqs = malloc(cap * sizeof *out->reqs);
    if (!out->reqs) return prs_error_set(err, PRS_ENOMEM, "out of memory for %zu requests", cap);
    return PRS_OK;
}

int prs_infer_trace_scale(const prs_infer_trace *in, double factor, prs_infer_trace *out,
                          prs_error *err)
{
    if (!(factor > 0) || !isfinite(factor))
        return prs_error_set(err, PRS_EINVAL, "rate scale factor must be > 0 (got %g)", factor);
    int rc = alloc_reqs(out, floor(factor * (double)in->n) + 1, err);
    if (rc) return rc;
    out->start_epoch_s = in->start_epoch_s;
    for (size_t i = 0; i < in->n; i++) {
        long k = (long)floor(factor * (double)(i + 1)) - (long)floor(factor * (double)i);
        double gap = i + 1 < in->n ? in->reqs[i + 1].arrival_s - in->reqs[i].arrival_s : 0;
        for (long j = 0; j < k; j++) {
            prs_infer_req q = in->reqs[i];
            q.arrival_s += gap * (double)j / (double)k;
            out->reqs[out->n++] = q;
        }
    }
    return PRS_OK;
}

int prs_infer_trace_scale_shift(const prs_infer_trace *in, double factor, double shift_s,
                                prs_infer_trace *out, prs_error *err)
{
    if (!(factor > 0) || !isfinite(factor) || factor > 1e4)
        return prs_error_set(err, PRS_EINVAL, "rate scale factor must be in (0, 1e4] (got %g)",
                             factor);
    if (in->n == 0) return prs_error_set(err, PRS_EINVAL, "cannot scale an empty trace");
    double span = tile_period_s(in);
    if (!(shift_s > 0) || !(shift_s <= span))
        return prs_error_set(err, PRS_EINVAL, "scale shift must be in (0, %g] s (got %g)", span,
                             shift_s);
    long copies = (long)ceil(factor);
    double frac = factor - floor(factor);
    int rc = alloc_reqs(out, (double)copies * (double)in->n, err);
    if (rc) return rc;
    out->start_epoch_s = in->start_epoch_s;
    for (long j = 0; j < copies; j++) {
        double off = (double)j * shift_s / (double)copies;
        int partial = j == copies - 1 && frac > 0;
        for (size_t i = 0; i < in->n; i++) {
            if (partial && prs__infer_unit((uint64_t)i * 0x9E3779B9u + (uint64_t)j) >= frac)
                continue;
            prs_infer_req q = in->reqs[i];
            q.arrival_s = fmod(q.arrival_s + off, span);
            out->reqs[out->n++] = q;
        }
    }
    rc = prs__infer_trace_sort(out, "scaled trace", err);
    if (rc) prs_infer_trace_free(out);
    return rc;
}

int prs_infer_trace_window(const prs_infer_trace *in, double from_s, double to_s,
                           prs_infer_trace *out, prs_error *err)
{
    if (!(from_s >= 0) || !(to_s > from_s))
        return prs_error_set(err, PRS_EINVAL, "window [%g, %g) s is empty or negative", from_s,
                             to_s);
    size_t lo = 0, hi = 0;
    while (lo < in->n && in->reqs[lo].arrival_s < from_s)
        lo++;
    for (hi = lo; hi < in->n && in->reqs[hi].arrival_s < to_s; hi++)
        ;
    if (hi == lo)
        return prs_error_set(err, PRS_ERANGE, "no request in the window [%g, %g) s", from_s, to_s);
    int rc = alloc_reqs(out, (double)(hi - lo), err);
    if (rc) return rc;
    out->start_epoch_s = in->start_epoch_s ? in->start_epoch_s + from_s : 0;
    for (size_t i = lo; i < hi; i++) {
        out->reqs[out->n] = in->reqs[i];
        out->reqs[out->n++].arrival_s -= from_s;
    }
    return PRS_OK;
}

int prs_infer_trace_tile(const prs_infer_trace *in, int days, double depth, double peak_hour,
                         prs_infer_trace *out, prs_error *err)
{
    if (days < 1 || days > 366)
        return prs_error_set(err, PRS_EINVAL, "tile days must be in 1..366 (got %d)", days);
    if (!(depth >= 0 && depth < 1))
        return prs_error_set(err, PRS_EINVAL, "diurnal depth must be in [0, 1) (got %g)", depth);
    if (in->n == 0) return prs_error_set(err, PRS_EINVAL, "cannot tile an empty trace");
    double period = tile_period_s(in), span = days * 86400.0;
    double copies = ceil(span / period);
    /* The diurnal swing keeps (1 - depth/2) of the requests on average: room for all of them,
     * bounded by the request limit. */
    int rc = alloc_reqs(out, copies * (double)in->n, err);
    if (rc) return rc;
    out->start_epoch_s = in->start_epoch_s;
    uint64_t index = 0;
    for (long c = 0; c < (long)copies; c++) {
        for (size_t i = 0; i < in->n; i++, index++) {
            double t = (double)c * period + in->reqs[i].arrival_s;
            if (t >= span) break;
            double phase = 2 * 3.14159265358979323846 * (t / 86400.0 - peak_hour / 24.0);
            double keep = 1 - depth * (1 - cos(phase)) / 2; /* 1 at peak_hour */
            if (prs__infer_unit(index) >= keep) continue;
            out->reqs[out->n] = in->reqs[i];
            out->reqs[out->n++].arrival_s = t;
        }
    }
    /* Give the unused tail back: a 7-day trace at depth 0.5 holds a quarter less. */
    prs_infer_req *p = realloc(out->reqs, (out->n ? out->n : 1) * sizeof *p);
    if (p) out->reqs = p;
    return PRS_OK;
}

double prs_infer_trace_peak_rate(const prs_infer_trace *t, double window_s)
{
    if (t->n == 0 || !(window_s > 0)) return 0;
    double best = 0;
    size_t i = 0;
    while (i < t->n) {
        long w = (long)floor(t->reqs[i].arrival_s / window_s);
        size_t count = 0;
        while (i < t->n && (long)floor(t->reqs[i].arrival_s / window_s) == w) {
            count++;
            i++;
        }
        if ((double)count / window_s > best) best = (double)count / window_s;
    }
    return best;
}
