/* One GPU's energy history for the monitor, and where a window's edge falls in it
 * (monitor_int.h). Points are appended in time order and pruned from the front; lookups are a
 * binary search. Memory is what the pending edges need: a few points once they are resolved. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "monitor_int.h"
#include "perseus/error.h"

void prs__mon_track_init(prs__mon_track *k, int power_mode)
{
    memset(k, 0, sizeof *k);
    prs__client_refresh_init(&k->fit);
    k->power_mode = power_mode;
    k->last_power_w = NAN;
}

void prs__mon_track_free(prs__mon_track *k)
{
    free(k->pts);
    memset(k, 0, sizeof *k);
}

static int push(prs__mon_track *k, double t_s, double e_j)
{
    if (k->n > 0 && (!(t_s > k->pts[k->n - 1].t_s) || e_j < k->pts[k->n - 1].e_j)) return 0;
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 256;
        prs__mon_point *p = realloc(k->pts, cap * sizeof *p);
        if (!p) return PRS_ENOMEM;
        k->pts = p;
        k->cap = cap;
    }
    k->pts[k->n++] = (prs__mon_point){t_s, e_j};
    return 0;
}

int prs__mon_track_add(prs__mon_track *k, double t_lo, double t_hi, double value)
{
    if (!(t_hi >= t_lo) || !isfinite(value)) return 0;
    if (!k->power_mode) {
        /* Before the refresh fit has judged the counter, a bracket that begins where the last
         * one ended (the value changed at consecutive reads: a continuous counter) is dated at
         * its read, as the fit will date it once it calls the counter continuous. */
        int touching = k->n > 0 && t_lo == k->last_hi_s;
        k->last_hi_s = t_hi;
        int judged = k->fit.locked || k->fit.contiguous;
        prs__client_refresh_map(&k->fit, &t_lo, &t_hi);
        if (touching && !judged) t_lo = t_hi;
        return push(k, 0.5 * (t_lo + t_hi), value);
    }
    double t = 0.5 * (t_lo + t_hi), p = value;
    if (k->n == 0) {
        k->last_power_w = p;
        return push(k, t, 0);
    }
    const prs__mon_point *last = &k->pts[k->n - 1];
    if (!(t > last->t_s)) return 0;
    double e = last->e_j + 0.5 * (k->last_power_w + p) * (t - last->t_s);
    k->last_power_w = p;
    return push(k, t, e);
}

/* Index of the first point after t (n when none). */
static size_t first_after(const prs__mon_track *k, double t)
{
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->pts[mid].t_s > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Mean power over points i..i+1; NAN when out of range. */
static double slope(const prs__mon_track *k, size_t i)
{
    if (i + 1 >= k->n) return NAN;
    const prs__mon_point *a = &k->pts[i], *b = &k->pts[i + 1];
    return (b->e_j - a->e_j) / (b->t_s - a->t_s);
}

int prs__mon_track_resolve(const prs__mon_track *k, prs__mon_mark *m, int force)
{
    if (m->resolved) return 1;
    size_t n = k->n, j = first_after(k, m->t_s);
    if (n == 0) return 0;
    m->after_seq = k->base_seq + (long long)j;
    if (j == n || j == 0) { /* no point after, or none before: extrapolate */
        if (j == n && !force) return 0;
        const prs__mon_point *p = j == n ? &k->pts[n - 1] : &k->pts[0];
        double power = n >= 2 ? slope(k, j == n ? n - 2 : 0) : 0;
        m->e_j = p->e_j + power * (m->t_s - p->t_s);
        if (m->e_j < 0) m->e_j = 0;
        m->estimate = 1;
        m->resolved = 1;
        return 1;
    }
    double p_next = slope(k, j);
    if (isnan(p_next) && !force) return 0;
    const prs__mon_point *a = &k->pts[j - 1], *b = &k->pts[j];
    double p_prev = j >= 2 ? slope(k, j - 2) : NAN;
    double before = m->t_s - a->t_s, after = b->t_s - m->t_s;
    double w_before = before, w_after = after; /* linear split unless both powers are known */
    if (p_prev >= 0 && p_next >= 0 && p_prev * before + p_next * after > 0) {
        w_before = p_prev * before;
        w_after = p_next * after;
    }
    m->e_j = a->e_j + (b->e_j - a->e_j) * (w_before / (w_before + w_after));
    m->estimate = isnan(p_next);
    m->resolved = 1;
    return 1;
}

void prs__mon_track_prune(prs__mon_track *k, double keep_t_s)
{
    size_t j = isinf(keep_t_s) ? k->n : first_after(k, keep_t_s);
    size_t drop = j >= 2 ? j - 2 : 0;
    if (k->n >= 3 && drop > k->n - 3) drop = k->n - 3;
    if (k->n < 3) drop = 0;
    if (drop == 0) return;
    memmove(k->pts, k->pts + drop, (k->n - drop) * sizeof *k->pts);
    k->n -= drop;
    k->base_seq += (long long)drop;
}

double prs__mon_track_period(const prs__mon_track *k)
{
    if (!k->power_mode && k->fit.period > 0 && !k->fit.contiguous) return k->fit.period;
    if (k->n < 2) return 0;
    size_t first = k->n > 16 ? k->n - 16 : 0;
    return (k->pts[k->n - 1].t_s - k->pts[first].t_s) / (double)(k->n - 1 - first);
}
