/* The noise plot of include/perseus/plot.h (prs_plot_noise): one panel per noise statistic,
 * built on the chart helpers of plot.c (plot_int.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/plot.h"
#include "plot_int.h"

/* ---- noise ------------------------------------------------------------------------------ */

#define NOISE_MAX_LEVELS 128
#define NOISE_MAX_MODELS 4
#define NOISE_W 1180.0

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, minimum and maximum of n values spaced stride apart (work: n doubles). */
static void noise_stats(const double *v, size_t n, size_t stride, double *work, double out[3])
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i * stride])) work[m++] = v[i * stride];
    if (!m) {
        out[0] = out[1] = out[2] = NAN;
        return;
    }
    qsort(work, m, sizeof *work, cmp_dbl);
    out[0] = m % 2 ? work[m / 2] : 0.5 * (work[m / 2 - 1] + work[m / 2]);
    out[1] = work[0];
    out[2] = work[m - 1];
}

/* Index of each level's cost model among the distinct names (in order of appearance). */
static int noise_models(const prs_noise_plot *p, const char **names, int *model_of)
{
    int n = 0;
    for (size_t i = 0; i < p->nlevels; i++) {
        const char *m = p->levels[i].cost_model ? p->levels[i].cost_model : "";
        int k = 0;
        while (k < n && strcmp(names[k], m) != 0)
            k++;
        if (k == n) {
            if (n == NOISE_MAX_MODELS) return -1;
            names[n++] = m;
        }
        model_of[i] = k;
    }
    return n;
}

/* stats[(level * 2 + planner) * 3 ..]: median, min, max of one panel's metric. */
static int noise_panel_stats(const prs_noise_plot *p, int overshoot, double *stats, range *yr)
{
    double *work = malloc(sizeof *work * p->nseeds);
    if (!work) return PRS_ENOMEM;
    for (size_t i = 0; i < p->nlevels; i++)
        for (int pl = 0; pl < 2; pl++) {
            const double *v =
                overshoot ? p->levels[i].overshoot_pct[pl] : p->levels[i].regret_pct[pl];
            double *st = stats + (i * 2 + (size_t)pl) * 3;
            noise_stats(v, p->nseeds, p->stride, work, st);
            prs__plot_range_add(yr, st[1]);
            prs__plot_range_add(yr, st[2]);
        }
    free(work);
    return 0;
}

/* One panel: per (model, planner) series a median line with markers and min-max whiskers. */
static void noise_panel(prs_svg *s, const chart *c, const prs_noise_plot *p, const double *stats,
                        const int *model_of, int nmodels)
{
    static const marker_shape shapes[2] = {MARK_CIRCLE, MARK_SQUARE};
    if (c->y0 < 0 && c->y1 > 0)
        prs_svg_line(s, c->left, prs__plot_map_y(c, 0), c->right, prs__plot_map_y(c, 0), "stroke",
                     "#777", PRS_SVG_END);
    int nser = nmodels * 2;
    for (int m = 0; m < nmodels; m++)
        for (int pl = 0; pl < 2; pl++) {
            double off = ((double)(m * 2 + pl) - (nser - 1) / 2.0) * 5.0;
            double px = NAN, py = NAN;
            for (size_t i = 0; i < p->nlevels; i++) {
                if (model_of[i] != m) continue;
                const double *st = stats + (i * 2 + (size_t)pl) * 3;
                if (!isfinite(st[0])) continue;
                double x = prs__plot_map_x(c, p->levels[i].jitter_pct) + off,
                       y = prs__plot_map_y(c, st[0]);
                prs_svg_line(s, x, prs__plot_map_y(c, st[1]), x, prs__plot_map_y(c, st[2]),
                             "stroke", prs__plot_palette[pl], "stroke-width", "1.5", PRS_SVG_END);
                if (isfinite(px)) {
                    prs_svg_begin(s, "line");
                    prs_svg_attr_num(s, "x1", px);
                    prs_svg_attr_num(s, "y1", py);
                    prs_svg_attr_num(s, "x2", x);
                    prs_svg_attr_num(s, "y2", y);
                    prs_svg_attrs(s, "stroke", prs__plot_palette[pl], "stroke-width", "2",
                                  PRS_SVG_END);
                    if (prs__plot_dashes[m])
                        prs_svg_attr(s, "stroke-dasharray", prs__plot_dashes[m]);
                    prs_svg_end(s);
                }
                prs__plot_draw_marker(s, shapes[pl], x, y, 8, prs__plot_palette[pl], 1);
                px = x;
                py = y;
            }
        }
}

static int noise_check(const prs_noise_plot *p, prs_error *err)
{
    if (!p || !p->levels || !p->nlevels || !p->nseeds || !p->stride)
        return prs_error_set(err, PRS_EINVAL, "plot: no noise levels to draw");
    if (p->nlevels > NOISE_MAX_LEVELS)
        return prs_error_set(err, PRS_EINVAL, "plot: at most %d noise levels", NOISE_MAX_LEVELS);
    for (size_t i = 0; i < p->nlevels; i++) {
        const prs_noise_plot_level *l = &p->levels[i];
        if (!isfinite(l->jitter_pct) || !l->overshoot_pct[0] || !l->overshoot_pct[1] ||
            !l->regret_pct[0] || !l->regret_pct[1])
            return prs_error_set(err, PRS_EINVAL, "plot: noise level %zu has no data", i);
    }
    return 0;
}

static int noise_chart(chart *c, double left, double right, int sub, range xr, range yr)
{
    c->left = left;
    c->right = right;
    c->top = sub ? 84 : 68;
    c->bottom = CHART_H - 64;
    if (yr.lo > 0) yr.lo = 0;
    if (yr.hi < 0) yr.hi = 0;
    if (!(yr.lo <= yr.hi)) yr.lo = yr.hi = 0;
    return prs__plot_chart_axis(xr.lo, xr.hi, 0.06, 0.06, 6, &c->x0, &c->x1, &c->xt) ||
           prs__plot_chart_axis(yr.lo, yr.hi, 0.04, 0.06, 7, &c->y0, &c->y1, &c->yt);
}

int prs_plot_noise(FILE *out, const prs_noise_plot *p, prs_error *err)
{
    if (!out) return prs_error_set(err, PRS_EINVAL, "plot: no output");
    int rc = noise_check(p, err), model_of[NOISE_MAX_LEVELS];
    if (rc) return rc;
    const char *names[NOISE_MAX_MODELS];
    int nm = noise_models(p, names, model_of);
    if (nm < 0)
        return prs_error_set(err, PRS_EINVAL, "plot: at most %d cost models", NOISE_MAX_MODELS);
    double *stats = malloc(sizeof *stats * p->nlevels * 12);
    if (!stats) return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    range xr = {INFINITY, -INFINITY}, yo = {INFINITY, -INFINITY}, yg = {INFINITY, -INFINITY};
    for (size_t i = 0; i < p->nlevels; i++)
        prs__plot_range_add(&xr, p->levels[i].jitter_pct);
    chart co, cg;
    if (noise_panel_stats(p, 1, stats, &yo) ||
        noise_panel_stats(p, 0, stats + p->nlevels * 6, &yg)) {
        free(stats);
        return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    }
    legend_entry le[NOISE_MAX_MODELS * 2];
    char labels[NOISE_MAX_MODELS * 2][64];
    for (int m = 0; m < nm; m++)
        for (int pl = 0; pl < 2; pl++) {
            int k = m * 2 + pl;
            snprintf(labels[k], sizeof labels[k], "%s%s%s", pl ? "robust" : "baseline",
                     names[m][0] ? ", " : "", names[m]);
            le[k] = (legend_entry){labels[k], prs__plot_palette[pl],          prs__plot_dashes[m],
                                   2,         pl ? MARK_SQUARE : MARK_CIRCLE, 1,
                                   NULL};
        }
    double lw = prs__plot_legend_width(le, (size_t)nm * 2);
    int sub = p->subtitle != NULL;
    if (noise_chart(&co, 80, 500, sub, xr, yo) ||
        noise_chart(&cg, 600, NOISE_W - lw - 40, sub, xr, yg)) {
        free(stats);
        return prs_error_set(err, PRS_EINVAL, "plot: cannot scale the axes");
    }
    const char *title = p->title ? p->title : "What profile noise costs";
    prs_svg *s = prs_svg_new(out, NOISE_W, CHART_H, title);
    if (!s) {
        free(stats);
        return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    }
    prs__plot_draw_page(s, NOISE_W, CHART_H, title, p->subtitle);
    text_style pt = {AXIS_TITLE_PX, "middle", "#111", 1, 0};
    prs__plot_draw_text(s, (co.left + co.right) / 2, co.top - 8,
                        "Fastest plan: time over true T_{min}", &pt);
    prs__plot_draw_text(s, (cg.left + cg.right) / 2, cg.top - 8, "Fastest plan: energy regret",
                        &pt);
    prs__plot_draw_axes(s, &co, "Time jitter per measurement (%)", "Overshoot (%)");
    prs__plot_draw_axes(s, &cg, "Time jitter per measurement (%)", "Regret (%)");
    noise_panel(s, &co, p, stats, model_of, nm);
    noise_panel(s, &cg, p, stats + p->nlevels * 6, model_of, nm);
    prs__plot_draw_legend(s, cg.right + 16, cg.top, le, (size_t)nm * 2);
    prs_svg_close(s);
    free(stats);
    return prs_svg_finish(s, err);
}
