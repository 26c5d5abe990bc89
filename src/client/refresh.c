/* The energy counter's refresh instants (refresh.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "refresh.h"

#define FIT_EVERY 32   /* brackets between fits once locked */
#define FIT_MIN 16     /* brackets before the first fit */
#define SLACK_S 2e-4   /* a fitted instant may lie this far outside its bracket */
#define HOLD_SHARE 0.9 /* share of brackets a fit must fall in */

void prs__client_refresh_init(prs__client_refresh *r)
{
    memset(r, 0, sizeof *r);
}

static double lo_at(const prs__client_refresh *r, int i)
{
    return r->lo[(r->head + i) % PRS__CLIENT_REFRESH_WINDOW];
}

static double hi_at(const prs__client_refresh *r, int i)
{
    return r->hi[(r->head + i) % PRS__CLIENT_REFRESH_WINDOW];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median gap between consecutive midpoints: the period, up to the brackets' width. */
static double median_gap(const prs__client_refresh *r)
{
    double g[PRS__CLIENT_REFRESH_WINDOW];
    for (int i = 1; i < r->len; i++)
        g[i - 1] = 0.5 * (lo_at(r, i) + hi_at(r, i) - lo_at(r, i - 1) - hi_at(r, i - 1));
    qsort(g, (size_t)(r->len - 1), sizeof *g, cmp_double);
    return g[(r->len - 1) / 2];
}

/* Least squares of the midpoints on their refresh numbers; locked when the fitted instants fall
 * in (nearly) every bracket. */
static void fit(prs__client_refresh *r)
{
    r->since_fit = 0;
    int touching = 0;
    for (int i = 1; i < r->len; i++)
        touching += fabs(lo_at(r, i) - hi_at(r, i - 1)) < 1e-9;
    r->contiguous = touching >= HOLD_SHARE * (r->len - 1);
    r->locked = 0;
    if (r->contiguous) return; /* the value changes at every read: it is the read's value */
    double p0 = median_gap(r), m0 = 0.5 * (lo_at(r, 0) + hi_at(r, 0));
    if (!(p0 > 0)) return;
    double sk = 0, sm = 0, skk = 0, skm = 0;
    for (int i = 0; i < r->len; i++) {
        double m = 0.5 * (lo_at(r, i) + hi_at(r, i)), k = nearbyint((m - m0) / p0);
        sk += k;
        sm += m;
        skk += k * k;
        skm += k * m;
    }
    double n = r->len, den = n * skk - sk * sk;
    if (!(den > 0)) return;
    double period = (n * skm - sk * sm) / den, phase = (sm - period * sk) / n;
    if (!(period > 0)) return;
    int inside = 0;
    for (int i = 0; i < r->len; i++) {
        double m = 0.5 * (lo_at(r, i) + hi_at(r, i));
        double t = phase + nearbyint((m - phase) / period) * period;
        inside += t >= lo_at(r, i) - SLACK_S && t <= hi_at(r, i) + SLACK_S;
    }
    r->locked = inside >= HOLD_SHARE * n;
    r->period = period;
    r->phase = phase;
}

void prs__client_refresh_map(prs__client_refresh *r, double *lo, double *hi)
{
    int at = (r->head + r->len) % PRS__CLIENT_REFRESH_WINDOW;
    if (r->len == PRS__CLIENT_REFRESH_WINDOW)
        r->head = (r->head + 1) % PRS__CLIENT_REFRESH_WINDOW;
    else
        r->len++;
    r->lo[at] = *lo;
    r->hi[at] = *hi;
    r->since_fit++;
    if (r->len >= FIT_MIN && (r->since_fit >= FIT_EVERY || (!r->locked && r->since_fit >= 8)))
        fit(r);
    if (r->contiguous) {
        *lo = *hi;
        return;
    }
    if (!r->locked) return;
    double m = 0.5 * (*lo + *hi);
    double t = r->phase + nearbyint((m - r->phase) / r->period) * r->period;
    if (t < *lo - SLACK_S || t > *hi + SLACK_S) return; /* the fit misses this one */
    t = t < *lo ? *lo : t > *hi ? *hi : t;
    *lo = *hi = t;
}
