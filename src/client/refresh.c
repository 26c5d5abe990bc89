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
#define SEARCH_STEPS 40   /* steps of the searches for a period (each halves or more) */

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

/* The brackets numbered for the search; the ones dropped as contradicting the others are off. */
typedef struct numbered {
    double lo[PRS__CLIENT_REFRESH_WINDOW], hi[PRS__CLIENT_REFRESH_WINDOW];
    double k[PRS__CLIENT_REFRESH_WINDOW];
    int off[PRS__CLIENT_REFRESH_WINDOW];
    int n;
} numbered;

/* For period p, the phases (instants of refresh number 0) that every bracket on allows:
 * [*from, *to], each bracket allowing [lo - k p, hi - k p] widened by SLACK_S. Returns the
 * stretch's length (negative when the brackets contradict each other at p), and in *tight_lo,
 * *tight_hi the brackets that bound it. */
static double allowed(const numbered *b, double p, double *from, double *to, int *tight_lo,
                      int *tight_hi)
{
    double a = -INFINITY, z = INFINITY;
    *tight_lo = *tight_hi = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->off[i]) continue;
        double x = b->lo[i] - b->k[i] * p, y = b->hi[i] - b->k[i] * p;
        if (x > a) a = x, *tight_lo = i;
        if (y < z) z = y, *tight_hi = i;
    }
    *from = a - SLACK_S;
    *to = z + SLACK_S;
    return *to - *from;
}

static double stretch(const numbered *b, double p)
{
    double a, z;
    int i, j;
    return allowed(b, p, &a, &z, &i, &j);
}

/* The period in [lo, hi] where the stretch of allowed phases is longest (it is concave in the
 * period: the least of lines less the greatest): golden-section search. */
static double longest(const numbered *b, double lo, double hi)
{
    const double g = 0.6180339887498949;
    double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
    double f1 = stretch(b, x1), f2 = stretch(b, x2);
    for (int it = 0; it < SEARCH_STEPS; it++) {
        if (f1 < f2) {
            lo = x1, x1 = x2, f1 = f2;
            x2 = lo + g * (hi - lo), f2 = stretch(b, x2);
        } else {
            hi = x2, x2 = x1, f2 = f1;
            x1 = hi - g * (hi - lo), f1 = stretch(b, x1);
        }
    }
    return 0.5 * (lo + hi);
}

/* Where the stretch falls to nothing between in (some left) and out (none): bisection. */
static double edge_of(const numbered *b, double in, double out)
{
    for (int it = 0; it < SEARCH_STEPS; it++) {
        double m = 0.5 * (in + out);
        if (stretch(b, m) >= 0)
            in = m;
        else
            out = m;
    }
    return in;
}

/* The period near p1 (within +-span, widened when the brackets allow more) and its phase that the
 * brackets allow: the middle of the periods that every bracket on allows, and the middle of that
 * period's phases (where the longest stretch of phases sits at a corner of what they allow).
 * Brackets that contradict the others (a refresh numbered wrong, a value dated wrong) go off, the
 * two that bind where the stretch is longest, at most a tenth of them. 0 when none is left. */
static int search(numbered *b, double p1, double span, double *period, double *phase)
{
    for (int dropped = 0;;) {
        double lo = p1 - span, hi = p1 + span, best = longest(b, lo, hi), a, z;
        int i, j;
        if (allowed(b, best, &a, &z, &i, &j) < 0) {
            if (dropped + 2 > b->n / 10) return 0;
            b->off[i] = b->off[j] = 1;
            dropped += 2;
            continue;
        }
        for (int w = 0; w < 4 && (stretch(b, lo) >= 0 || stretch(b, hi) >= 0); w++)
            lo = best - 4 * (best - lo), hi = best + 4 * (hi - best);
        *period = 0.5 * (edge_of(b, best, lo) + edge_of(b, best, hi));
        allowed(b, *period, &a, &z, &i, &j);
        *phase = 0.5 * (a + z);
        return 1;
    }
}

/* The refresh instant a bracket's value was taken at by the fit: the latest before its end, or
 * one just past it within the slack; NAN when none falls in the bracket. */
static double instant(double period, double phase, double lo, double hi)
{
    double t = phase + floor((hi - phase) / period) * period;
    if (t < lo - SLACK_S) t += period;
    return t < lo - SLACK_S || t > hi + SLACK_S ? NAN : t;
}

/* Numbers the brackets by the line (p1, *ph1), the latest one's 0, and moves *ph1 to it: the
 * phase is the latest refresh, what the next brackets are dated from. Returns the brackets'
 * median width. */
static double renumber(const prs__client_refresh *r, double p1, double *ph1, numbered *b)
{
    double k_last = nearbyint((0.5 * (lo_at(r, r->len - 1) + hi_at(r, r->len - 1)) - *ph1) / p1);
    *ph1 += k_last * p1;
    double w[PRS__CLIENT_REFRESH_WINDOW] = {0};
    b->n = r->len;
    for (int i = 0; i < r->len; i++) {
        b->lo[i] = lo_at(r, i);
        b->hi[i] = hi_at(r, i);
        b->k[i] = nearbyint((0.5 * (b->lo[i] + b->hi[i]) - *ph1) / p1);
        b->off[i] = 0;
        w[i] = b->hi[i] - b->lo[i];
    }
    qsort(w, (size_t)r->len, sizeof *w, cmp_double);
    return w[r->len / 2];
}

/* The refresh instants phase + k * period that fall in the most brackets: a first period from
 * the median gap, the brackets numbered by it, a weighted line through their middles, then the
 * period and phase near it that the brackets themselves allow (a middle is off by up to half its
 * bracket; the brackets' ends are what is known). Locked when the instants fall in
 * (nearly) every bracket. */
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
    numbered b = {.n = 0};
    double median_w = renumber(r, p1, &ph1, &b), k_span = -b.k[0];
    if (!(k_span > 0)) return;
    /* over the window, a period off by this much moves the last instant one median width */
    double span = (median_w + MIN_WIDTH_S) / k_span, period = p1, phase = ph1;
    if (!search(&b, p1, span, &period, &phase)) return;
    int inside = 0;
    for (int i = 0; i < r->len; i++)
        inside += !isnan(instant(period, phase, lo_at(r, i), hi_at(r, i)));
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
    double t = instant(r->period, r->phase, *lo, *hi);
    if (isnan(t)) return; /* the fit misses this one */
    t = t < *lo ? *lo : t > *hi ? *hi : t;
    *lo = *hi = t;
}
