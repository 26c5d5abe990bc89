/* The energy counter's refresh instants (refresh.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "refresh.h"

#define FIT_EVERY 16      /* brackets between fits once the window has FIT_YOUNG */
#define FIT_MIN 16        /* brackets before the first fit */
#define FIT_YOUNG 64      /* brackets until which every one is fitted */
#define SLACK_S 2e-4      /* a fitted instant may lie this far outside its bracket */
#define HOLD_SHARE 0.9    /* share of brackets a fit must fall in */
#define MIN_WIDTH_S 1e-4  /* a bracket counts as at least this wide in the weighted line */
#define ANCHOR_SHARE 0.25 /* a bracket at most this share of a period wide anchors numbering */
#define SEARCH_STEPS 8    /* grid points of the period search on each side of its centre */

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

/* Refresh numbers for period p, the first bracket's 0: each counts the periods between its middle
 * and the last narrow bracket's before it (a gap spans a few periods at most, so a period off by a
 * little numbers every bracket right, where counting from the first would drift by one; the
 * middle of a wide bracket, a read held up, may lie half a period off and is no one's anchor). */
static void number(const prs__client_refresh *r, double p, double *k)
{
    double anchor_m = 0.5 * (lo_at(r, 0) + hi_at(r, 0)), anchor_k = 0;
    for (int i = 0; i < r->len; i++) {
        double m = 0.5 * (lo_at(r, i) + hi_at(r, i));
        k[i] = anchor_k + nearbyint((m - anchor_m) / p);
        if (hi_at(r, i) - lo_at(r, i) <= ANCHOR_SHARE * p) {
            anchor_m = m;
            anchor_k = k[i];
        }
    }
}

/* Least squares of the brackets' middles on their refresh numbers k, each weighted by its
 * precision (1 / width squared); a bracket wider than half a period (a read held up) has a
 * middle that may lie nearer the wrong refresh and counts for nothing. 0 when it cannot. */
static int weighted_line(const prs__client_refresh *r, const double *k, double p0, double *period,
                         double *phase)
{
    double sw = 0, sk = 0, sm = 0, skk = 0, skm = 0;
    for (int i = 0; i < r->len; i++) {
        double w = hi_at(r, i) - lo_at(r, i), m = 0.5 * (lo_at(r, i) + hi_at(r, i));
        if (w > 0.5 * p0) continue;
        double q = 1.0 / (w * w + MIN_WIDTH_S * MIN_WIDTH_S);
        sw += q;
        sk += q * k[i];
        sm += q * m;
        skk += q * k[i] * k[i];
        skm += q * k[i] * m;
    }
    double den = sw * skk - sk * sk;
    if (!(den > 0)) return 0;
    *period = (sw * skm - sk * sm) / den;
    *phase = (sm - *period * sk) / sw;
    return *period > 0;
}

typedef struct edge {
    double x;
    int d; /* +1 an interval opens, -1 one closes */
} edge;

static int cmp_edge(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    return x->x < y->x ? -1 : x->x > y->x ? 1 : y->d - x->d; /* opens before closes */
}

/* For period p: the phase (the instant of refresh number 0) that the most brackets allow, each
 * bracket k[i] allowing [lo - k p, hi - k p] (with SLACK_S); the middle of the longest stretch
 * allowed by that many. Returns the count, *len the stretch's length. */
static int best_phase(const prs__client_refresh *r, const double *k, double p, double *phase,
                      double *len)
{
    edge e[2 * PRS__CLIENT_REFRESH_WINDOW];
    int n = 0;
    for (int i = 0; i < r->len; i++) {
        e[n++] = (edge){lo_at(r, i) - k[i] * p - SLACK_S, +1};
        e[n++] = (edge){hi_at(r, i) - k[i] * p + SLACK_S, -1};
    }
    qsort(e, (size_t)n, sizeof *e, cmp_edge);
    int cover = 0, best = -1;
    *len = 0;
    *phase = n ? e[0].x : 0;
    for (int j = 0; j + 1 < n; j++) {
        cover += e[j].d;
        double l = e[j + 1].x - e[j].x;
        if (cover > best || (cover == best && l > *len)) {
            best = cover;
            *len = l;
            *phase = 0.5 * (e[j].x + e[j + 1].x);
        }
    }
    return best;
}

/* The period near p1 (within +-span) and its phase that the most brackets allow: of the periods
 * of a grid that the most allow, the middle one, then the same on a finer grid over them (the
 * middle of what the brackets allow, where the longest stretch of phases sits at a corner). */
static int search(const prs__client_refresh *r, const double *k, double p1, double span,
                  double *period, double *phase)
{
    int best = -1;
    double lo = p1 - span, hi = p1 + span;
    for (int level = 0; level < 2; level++) {
        double step = (hi - lo) / (2 * SEARCH_STEPS), first = lo, last = lo;
        best = -1;
        for (int j = 0; j <= 2 * SEARCH_STEPS; j++) {
            double p = lo + step * j, ph, len;
            int n = best_phase(r, k, p, &ph, &len);
            if (n > best)
                best = n, first = last = p;
            else if (n == best)
                last = p;
        }
        lo = first - step;
        hi = last + step;
        *period = 0.5 * (first + last);
    }
    double len;
    best = best_phase(r, k, *period, phase, &len);
    return best;
}

/* The refresh instants phase + k * period that fall in the most brackets: a first period from
 * the median gap, the brackets numbered by it, a weighted line through their middles, then the
 * period and phase near it that the brackets themselves allow (a middle is off by up to half its
 * bracket; the brackets' ends are what is known). Locked when the instants fall in (nearly) every
 * bracket. */
static void fit(prs__client_refresh *r)
{
    r->since_fit = 0;
    int touching = 0;
    for (int i = 1; i < r->len; i++)
        touching += fabs(lo_at(r, i) - hi_at(r, i - 1)) < 1e-9;
    r->contiguous = touching >= HOLD_SHARE * (r->len - 1);
    r->locked = 0;
    if (r->contiguous) return; /* the value changes at every read: it is the read's value */
    double p0 = median_gap(r), p1, ph1;
    if (!(p0 > 0)) return;
    double k[PRS__CLIENT_REFRESH_WINDOW] = {0};
    number(r, p0, k);
    if (!weighted_line(r, k, p0, &p1, &ph1)) return;
    /* numbered again by the line, the latest bracket's 0: the phase is the latest refresh,
     * what the next brackets are dated from */
    double k_last = nearbyint((0.5 * (lo_at(r, r->len - 1) + hi_at(r, r->len - 1)) - ph1) / p1);
    for (int i = 0; i < r->len; i++)
        k[i] = nearbyint((0.5 * (lo_at(r, i) + hi_at(r, i)) - ph1) / p1) - k_last;
    ph1 += k_last * p1;
    double widths[PRS__CLIENT_REFRESH_WINDOW] = {0};
    for (int i = 0; i < r->len; i++)
        widths[i] = hi_at(r, i) - lo_at(r, i);
    qsort(widths, (size_t)r->len, sizeof *widths, cmp_double);
    double k_span = -k[0];
    if (!(k_span > 0)) return;
    /* over the window, a period off by this much moves the last instant one median width */
    double span = (widths[r->len / 2] + MIN_WIDTH_S) / k_span, period = p1, phase = ph1;
    int inside = search(r, k, p1, span, &period, &phase);
    r->locked = inside >= HOLD_SHARE * r->len;
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
    /* at every bracket while the window is young (a fit of few brackets may be off by a few
     * tenths of a millisecond a period, and then dates the next ones a few milliseconds off),
     * then every FIT_EVERY (a fit of 64 brackets 10 ms wide may still be a hundredth of a
     * millisecond a period off: 0.3 ms after 32) */
    int every = r->len < FIT_YOUNG ? 1 : FIT_EVERY;
    if (r->len >= FIT_MIN && r->since_fit >= every) fit(r);
    if (r->contiguous) {
        *lo = *hi;
        return;
    }
    if (!r->locked) return;
    /* the value read at the bracket's end is the latest refresh's: a bracket that spans two (a
     * read held up for more than a period) dates its value at the second */
    double t = r->phase + floor((*hi - r->phase) / r->period) * r->period;
    if (t < *lo - SLACK_S) t += r->period; /* just past the end, within the fit's slack */
    if (t < *lo - SLACK_S || t > *hi + SLACK_S) return; /* the fit misses this one */
    t = t < *lo ? *lo : t > *hi ? *hi : t;
    *lo = *hi = t;
}
