/* Latency histograms and the energy meter (stats.h). Log-spaced bins keep every quantile
 * within one bin (1.2 %) of the exact order statistic in constant memory: a week of requests
 * and every one of their inter-token gaps cannot be kept one by one. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log10(x) for x > 0 by frexp and the atanh series of the mantissa (z < 1/3: the first four
 * terms leave an error under 2e-6, a thousandth of a bin), monotonic, and several times cheaper
 * than log10, which the replay would call at every decode step. */
static double fast_log10(double x)
{
    /* frexp's mantissa and exponent of a normal double, read from its bits (no call). */
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)((b >> 52) & 0x7ff) - 1022;
    b = (b & 0x000fffffffffffffULL) | 0x3fe0000000000000ULL;
    double m;
    memcpy(&m, &b, sizeof m);
    m *= 2; /* [1, 2) */
    double z = (m - 1) / (m + 1), z2 = z * z;
    double ln_m = 2 * z * (1 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7))));
    return ((double)(e - 1) * 0.69314718055994530942 + ln_m) * 0.43429448190325182765;
}

size_t prs__infer_hist_bin(double x_s)
{
    if (!(x_s >= PRS_INFER_HIST_MIN_S)) return 0; /* also NaN; from here x_s is normal */
    if (!(x_s < 1e300)) return PRS_INFER_HIST_BINS - 1;
    /* Truncation is floor here: a value below 0 (x_s within 2e-6 of a decade of the minimum)
     * truncates to 0 where floor gives -1, and both become bin 1 below. */
    double k = (double)(long)((fast_log10(x_s) + 5.0) * PRS_INFER_HIST_PER_DECADE) + 1;
    if (!(k < PRS_INFER_HIST_BINS - 1)) return PRS_INFER_HIST_BINS - 1;
    return k < 1 ? 1 : (size_t)k;
}

/* Upper edge of bin k (k >= 1). */
static double hist_edge(size_t k)
{
    return PRS_INFER_HIST_MIN_S * pow(10.0, (double)k / PRS_INFER_HIST_PER_DECADE);
}

size_t prs__infer_hist_cdf(const prs_infer_hist *h, double *x_s, double *share)
{
    size_t n = 0;
    uint64_t seen = 0;
    for (size_t k = 0; k < PRS_INFER_HIST_BINS && h->n > 0; k++) {
        if (!h->bins[k]) continue;
        seen += h->bins[k];
        double edge = k == 0 ? PRS_INFER_HIST_MIN_S : hist_edge(k);
        x_s[n] = edge < h->max_s ? edge : h->max_s;
        share[n++] = (double)seen / (double)h->n;
    }
    return n;
}

void prs__infer_hist_add(prs_infer_hist *h, double x_s, uint64_t count)
{
    if (count > 0) prs__infer_hist_add_at(h, prs__infer_hist_bin(x_s), x_s, count);
}

void prs__infer_hist_add_at(prs_infer_hist *h, size_t bin, double x_s, uint64_t count)
{
    h->bins[bin] += count;
    h->n += count;
    h->sum_s += x_s * (double)count;
    if (x_s > h->max_s) h->max_s = x_s;
}

double prs__infer_hist_quantile(const prs_infer_hist *h, double q)
{
    if (h->n == 0) return 0;
    double want = ceil(q * (double)h->n);
    if (want < 1) want = 1;
    uint64_t seen = 0;
    for (size_t k = 0; k < PRS_INFER_HIST_BINS; k++) {
        seen += h->bins[k];
        if ((double)seen >= want) {
            double edge = k == 0 ? PRS_INFER_HIST_MIN_S : hist_edge(k);
            return edge < h->max_s ? edge : h->max_s;
        }
    }
    return h->max_s;
}

int prs__infer_meter_init(prs_infer_meter *m, double bin_s, double horizon_s, prs_error *err)
{
    memset(m, 0, sizeof *m);
    if (!(bin_s > 0) || !(horizon_s >= 0) || horizon_s / bin_s > 1e8)
        return prs_error_set(err, PRS_EINVAL, "power bins of %g s over %g s: too many or none",
                             bin_s, horizon_s);
    m->bin_s = bin_s;
    m->n = (size_t)ceil(horizon_s / bin_s);
    if (m->n == 0) m->n = 1;
    m->energy_j = calloc(m->n, sizeof *m->energy_j);
    if (!m->energy_j) return prs_error_set(err, PRS_ENOMEM, "out of memory for power bins");
    return PRS_OK;
}

void prs__infer_meter_free(prs_infer_meter *m)
{
    free(m->energy_j);
    memset(m, 0, sizeof *m);
}

static size_t meter_bin(const prs_infer_meter *m, double t_s)
{
    double k = floor(t_s / m->bin_s);
    if (!(k >= 0)) return 0;
    return k >= (double)(m->n - 1) ? m->n - 1 : (size_t)k;
}

void prs__infer_meter_add(prs_infer_meter *m, double t0_s, double t1_s, double energy_j)
{
    m->total_j += energy_j;
    size_t a = meter_bin(m, t0_s), b = meter_bin(m, t1_s);
    if (a == b || !(t1_s > t0_s)) {
        m->energy_j[a] += energy_j;
        return;
    }
    double rate = energy_j / (t1_s - t0_s);
    for (size_t k = a; k <= b; k++) {
        double lo = k == a ? t0_s : (double)k * m->bin_s;
        double hi = k == b ? t1_s : (double)(k + 1) * m->bin_s;
        if (k == m->n - 1) hi = t1_s;
        m->energy_j[k] += rate * (hi - lo);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double prs__infer_meter_power_quantile(const prs_infer_meter *m, double until_s, double q)
{
    size_t n = (size_t)ceil(until_s / m->bin_s);
    if (n > m->n) n = m->n;
    if (n == 0) return 0;
    double *p = malloc(n * sizeof *p);
    if (!p) return NAN;
    for (size_t k = 0; k < n; k++)
        p[k] = m->energy_j[k] / m->bin_s;
    qsort(p, n, sizeof *p, cmp_double);
    double want = ceil(q * (double)n);
    size_t idx = want < 1 ? 0 : (size_t)want - 1;
    double r = p[idx < n ? idx : n - 1];
    free(p);
    return r;
}
