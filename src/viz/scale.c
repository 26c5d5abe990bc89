/* Scales for plots (include/perseus/plot.h): "nice" axis ticks and the viridis colormap.
 *
 * Ticks follow the usual loose labelling (Heckbert, "Nice numbers for graph labels", Graphics
 * Gems 1990): the step is 1, 2, 2.5 or 5 times a power of ten, the one that gives the number of
 * ticks closest to the asked-for count, and the tick range is widened to whole steps. Tick values
 * are computed as integer multiples of the step, never by repeated addition, so labels do not drift
 * ("0.30000000000000004").
 *
 * Viridis (van der Walt and Smith, matplotlib 2015) is sequential and perceptually uniform, and
 * reads in greyscale and to the common colour-vision deficiencies. Nine anchors of its 256-entry
 * table, linearly interpolated in sRGB, stay within a few levels of the full table; lightness
 * rises from one anchor to the next, so it rises monotonically along the whole map. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "perseus/plot.h"

int prs_nice_ticks(double data_lo, double data_hi, int target, prs_ticks *out)
{
    if (!out || !isfinite(data_lo) || !isfinite(data_hi) || data_lo > data_hi || target < 2)
        return PRS_EINVAL;
    double lo = data_lo, hi = data_hi;
    double mag = fmax(fabs(lo), fabs(hi));
    if (hi - lo <= mag * 1e-12) { /* one value: widen to a small symmetric range around it */
        double d = mag > 0 ? mag * 0.05 : 1.0;
        lo -= d;
        hi += d;
    }
    double range = hi - lo;
    if (!isfinite(range)) return PRS_EINVAL;
    /* Candidate steps around range / (target - 1); keep the one whose tick count is closest to
     * target (ties: the larger step, fewer labels). */
    static const double mantissas[] = {1.0, 2.0, 2.5, 5.0};
    int e0 = (int)floor(log10(range / (double)(target - 1)));
    double step = 0, m = 1, best = INFINITY, ilo = 0, ihi = 0;
    int exponent = e0;
    for (int e = e0 - 1; e <= e0 + 1; e++)
        for (size_t i = 0; i < sizeof mantissas / sizeof mantissas[0]; i++) {
            double st = mantissas[i] * pow(10.0, e);
            if (!(st > 0) || !isfinite(st)) continue;
            double a = floor(lo / st + 1e-9), b = ceil(hi / st - 1e-9);
            double miss = fabs((b - a + 1) - target);
            if (miss < best || (miss == best && st > step)) {
                best = miss;
                step = st;
                m = mantissas[i];
                exponent = e;
                ilo = a;
                ihi = b;
            }
        }
    if (!(step > 0) || ihi - ilo > 10000) return PRS_EINVAL;
    out->step = step;
    out->lo = ilo * step;
    out->hi = ihi * step;
    out->count = (int)(ihi - ilo) + 1;
    int decimals = -exponent + (m == 2.5 ? 1 : 0);
    out->decimals = decimals > 0 ? decimals : 0;
    return 0;
}

char *prs_ticks_label(const prs_ticks *t, int i, char *buf, size_t n)
{
    double v = t->lo + (double)i * t->step;
    snprintf(buf, n, "%.*f", t->decimals, v);
    /* "-0.00" -> "0.00" */
    if (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1)) memmove(buf, buf + 1, n - 1);
    return buf;
}

prs_rgb prs_colormap_viridis(double t)
{
    static const prs_rgb anchors[] = {
        {68, 1, 84},    {71, 44, 122}, {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
        {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37},
    };
    const int last = (int)(sizeof anchors / sizeof anchors[0]) - 1;
    if (!(t > 0)) t = 0; /* also NaN */
    if (t > 1) t = 1;
    double pos = t * last;
    int i = (int)floor(pos);
    if (i >= last) return anchors[last];
    double u = pos - i;
    const prs_rgb *a = &anchors[i], *b = &anchors[i + 1];
    prs_rgb c = {
        (unsigned char)lround(a->r + (b->r - a->r) * u),
        (unsigned char)lround(a->g + (b->g - a->g) * u),
        (unsigned char)lround(a->b + (b->b - a->b) * u),
    };
    return c;
}
