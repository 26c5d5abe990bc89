/* The plots of include/perseus/plot.h: frontier, savings, pipeline timeline and noise.
 *
 * Every plot is laid out on a fixed canvas in pixels: title and subtitle on top, the plot area
 * in the middle, axis titles outside it, and legends (and the timeline's colour bar) outside the
 * plot area, so no legend can hide data whatever the data's shape. Axes use loose "nice" ticks
 * (scale.c) with light grid lines. Colours for lines and markers come from the Okabe-Ito
 * prs__plot_palette, which stays distinguishable under the common colour-vision deficiencies; every
 * series also differs in dash pattern or marker shape, so the plots read in greyscale too.
 *
 * Long series (frontiers have thousands of points) are thinned in pixel space: a point closer
 * than a pixel or two to the last one kept adds nothing visible, and dropping it keeps the files
 * small. Labels may carry a subscript as "T_{min}"; it becomes a <tspan>.
 *
 * Each plot function checks its data, lays out the chart and calls one helper per layer
 * (frontier_check .. draw_baselines, timeline_check .. timeline_colour_bar). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/plot.h"
#include "plot_int.h"

/* Okabe-Ito's eight, then two darker shades for the ninth and tenth series (which differ in
 * dash pattern from all the others anyway). */
const char *const prs__plot_palette[] = {"#D55E00", "#0072B2", "#009E73", "#CC79A7", "#000000",
                                         "#E69F00", "#56B4E9", "#999999", "#8C4A00", "#004D7A"};
const char *const prs__plot_dashes[] = {NULL,   "8 4", "2 3", "9 3 2 3", "4 4",
                                        "12 3", "1 2", "6 2", "3 2 8 2", "10 2 2 2 2 2"};

/* ---- text ------------------------------------------------------------------------------- */

/* Width of a label with "_{...}" subscripts (set at 75 %). */
double prs__plot_rich_width(const char *text, double px)
{
    double w = 0;
    char buf[256];
    const char *p = text;
    while (*p) {
        const char *sub = strstr(p, "_{");
        const char *close = sub ? strchr(sub, '}') : NULL;
        size_t plain = close ? (size_t)(sub - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s", (int)(plain < 255 ? plain : 255), p);
        w += prs_svg_text_width(buf, px);
        if (!close) break;
        snprintf(buf, sizeof buf, "%.*s", (int)(close - sub - 2), sub + 2);
        w += prs_svg_text_width(buf, px * 0.75);
        p = close + 1;
    }
    return w;
}

void prs__plot_draw_text(prs_svg *s, double x, double y, const char *text, const text_style *st)
{
    prs_svg_begin(s, "text");
    prs_svg_attr_num(s, "x", x);
    prs_svg_attr_num(s, "y", y);
    prs_svg_attr_num(s, "font-size", st->size_px);
    if (st->anchor && strcmp(st->anchor, "start") != 0) prs_svg_attr(s, "text-anchor", st->anchor);
    if (st->fill) prs_svg_attr(s, "fill", st->fill);
    if (st->bold) prs_svg_attr(s, "font-weight", "bold");
    if (st->rotate_deg != 0)
        prs_svg_attrf(s, "transform", "rotate(%g %g %g)", st->rotate_deg, x, y);
    prs_svg_open(s);
    char buf[256];
    const char *p = text;
    while (*p) {
        const char *sub = strstr(p, "_{");
        const char *close = sub ? strchr(sub, '}') : NULL;
        if (!close) {
            prs_svg_text(s, p);
            break;
        }
        snprintf(buf, sizeof buf, "%.*s", (int)(sub - p < 255 ? sub - p : 255), p);
        prs_svg_text(s, buf);
        snprintf(buf, sizeof buf, "%.*s", (int)(close - sub - 2 < 255 ? close - sub - 2 : 255),
                 sub + 2);
        prs_svg_begin(s, "tspan");
        prs_svg_attrs(s, "baseline-shift", "sub", "font-size", "75%", PRS_SVG_END);
        prs_svg_open(s);
        prs_svg_text(s, buf);
        prs_svg_close(s);
        p = close + 1;
    }
    prs_svg_close(s);
}

/* Open the page: a group in the plots' font on a white background, with the title and the
 * optional subtitle centred on top. The caller closes the group. */
void prs__plot_draw_page(prs_svg *s, double width, double height, const char *title,
                         const char *subtitle)
{
    prs_svg_begin(s, "g");
    prs_svg_attrs(s, "font-family", FONT_FAMILY, PRS_SVG_END);
    prs_svg_open(s);
    prs_svg_rect(s, 0, 0, width, height, "fill", "white", PRS_SVG_END);
    text_style ts = {TITLE_PX, "middle", "#111", 1, 0};
    prs__plot_draw_text(s, width / 2, 28, title, &ts);
    if (subtitle) {
        text_style ss = {SUBTITLE_PX, "middle", "#555", 0, 0};
        prs__plot_draw_text(s, width / 2, 48, subtitle, &ss);
    }
}

/* ---- markers and legend ----------------------------------------------------------------- */

void prs__plot_draw_marker(prs_svg *s, marker_shape shape, double x, double y, double size,
                           const char *color, int filled)
{
    double r = size / 2;
    const char *fill = filled ? color : "white";
    switch (shape) {
    case MARK_NONE:
        return;
    case MARK_CIRCLE:
        prs_svg_begin(s, "circle");
        prs_svg_attr_num(s, "cx", x);
        prs_svg_attr_num(s, "cy", y);
        prs_svg_attr_num(s, "r", r);
        prs_svg_attrs(s, "fill", fill, "stroke", color, PRS_SVG_END);
        prs_svg_end(s);
        return;
    case MARK_SQUARE:
        prs_svg_rect(s, x - r * 0.9, y - r * 0.9, r * 1.8, r * 1.8, "fill", fill, "stroke", color,
                     "stroke-width", "1.5", PRS_SVG_END);
        return;
    case MARK_CROSS:
    case MARK_PLUS: {
        double d = shape == MARK_CROSS ? r * 0.8 : r;
        prs_svg_begin(s, "path");
        if (shape == MARK_CROSS)
            prs_svg_attrf(s, "d", "M%.2f %.2fL%.2f %.2fM%.2f %.2fL%.2f %.2f", x - d, y - d, x + d,
                          y + d, x - d, y + d, x + d, y - d);
        else
            prs_svg_attrf(s, "d", "M%.2f %.2fL%.2f %.2fM%.2f %.2fL%.2f %.2f", x - d, y, x + d, y, x,
                          y - d, x, y + d);
        prs_svg_attrs(s, "fill", "none", "stroke", color, "stroke-width", "2.5", PRS_SVG_END);
        prs_svg_end(s);
        return;
    }
    default:
        break;
    }
    prs_svg_begin(s, "path");
    if (shape == MARK_DIAMOND)
        prs_svg_attrf(s, "d", "M%.2f %.2fL%.2f %.2fL%.2f %.2fL%.2f %.2fZ", x, y - r * 1.2, x + r, y,
                      x, y + r * 1.2, x - r, y);
    else if (shape == MARK_TRIANGLE)
        prs_svg_attrf(s, "d", "M%.2f %.2fL%.2f %.2fL%.2f %.2fZ", x, y - r * 1.15, x + r,
                      y + r * 0.85, x - r, y + r * 0.85);
    else
        prs_svg_attrf(s, "d", "M%.2f %.2fL%.2f %.2fL%.2f %.2fZ", x, y + r * 1.15, x + r,
                      y - r * 0.85, x - r, y - r * 0.85);
    prs_svg_attrs(s, "fill", fill, "stroke", color, "stroke-width", "1.5", PRS_SVG_END);
    prs_svg_end(s);
}

#define LEGEND_ROW 20.0

double prs__plot_legend_width(const legend_entry *e, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++)
        w = fmax(w, prs__plot_rich_width(e[i].label, LEGEND_PX));
    return w + LEGEND_SAMPLE + 8 + 20;
}

/* A framed legend with its top-left corner at (x, y). */
void prs__plot_draw_legend(prs_svg *s, double x, double y, const legend_entry *e, size_t n)
{
    double w = prs__plot_legend_width(e, n), h = (double)n * LEGEND_ROW + 10;
    prs_svg_rect(s, x, y, w, h, "fill", "white", "stroke", "#bbb", "rx", "3", PRS_SVG_END);
    text_style ts = {LEGEND_PX, "start", "#222", 0, 0};
    for (size_t i = 0; i < n; i++) {
        double cy = y + 5 + LEGEND_ROW * ((double)i + 0.5), sx = x + 10;
        if (e[i].swatch_fill) {
            prs_svg_rect(s, sx, cy - 7, LEGEND_SAMPLE, 14, "fill", e[i].swatch_fill, "stroke",
                         "#666", "stroke-width", "0.5", PRS_SVG_END);
            if (strncmp(e[i].swatch_fill, "url(", 4) == 0) /* pattern over a mid colour */
                prs_svg_rect(s, sx, cy - 7, LEGEND_SAMPLE, 14, "fill", "none", "stroke", "#666",
                             "stroke-width", "0.5", PRS_SVG_END);
        }
        if (e[i].line_px > 0) {
            prs_svg_begin(s, "line");
            prs_svg_attr_num(s, "x1", sx);
            prs_svg_attr_num(s, "y1", cy);
            prs_svg_attr_num(s, "x2", sx + LEGEND_SAMPLE);
            prs_svg_attr_num(s, "y2", cy);
            prs_svg_attr(s, "stroke", e[i].color);
            prs_svg_attr_num(s, "stroke-width", e[i].line_px);
            if (e[i].dash) prs_svg_attr(s, "stroke-dasharray", e[i].dash);
            prs_svg_end(s);
        }
        if (e[i].marker != MARK_NONE)
            prs__plot_draw_marker(s, e[i].marker, sx + LEGEND_SAMPLE / 2, cy, 8, e[i].color,
                                  e[i].filled);
        prs__plot_draw_text(s, sx + LEGEND_SAMPLE + 8, cy + 4.5, e[i].label, &ts);
    }
}

/* ---- axes ------------------------------------------------------------------------------- */

double prs__plot_map_x(const chart *c, double x)
{
    return c->left + (x - c->x0) / (c->x1 - c->x0) * (c->right - c->left);
}

double prs__plot_map_y(const chart *c, double y)
{
    return c->bottom - (y - c->y0) / (c->y1 - c->y0) * (c->bottom - c->top);
}

static int tick_inside(double v, double lo, double hi)
{
    double eps = (hi - lo) * 1e-9;
    return v >= lo - eps && v <= hi + eps;
}

/* Grid, frame, tick labels and axis titles. */
void prs__plot_draw_axes(prs_svg *s, const chart *c, const char *xlabel, const char *ylabel)
{
    char buf[64];
    text_style tick_x = {TICK_PX, "middle", "#333", 0, 0}, tick_y = {TICK_PX, "end", "#333", 0, 0};
    prs_svg_rect(s, c->left, c->top, c->right - c->left, c->bottom - c->top, "fill", "white",
                 PRS_SVG_END);
    double ylabel_w = 0;
    for (int i = 0; i < c->xt.count; i++) {
        double v = c->xt.lo + i * c->xt.step, x = prs__plot_map_x(c, v);
        if (!tick_inside(v, c->x0, c->x1)) continue;
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#e3e3e3", PRS_SVG_END);
        prs_svg_line(s, x, c->bottom, x, c->bottom + 5, "stroke", "#333", PRS_SVG_END);
        prs__plot_draw_text(s, x, c->bottom + 19, prs_ticks_label(&c->xt, i, buf, sizeof buf),
                            &tick_x);
    }
    for (int i = 0; i < c->yt.count; i++) {
        double v = c->yt.lo + i * c->yt.step, y = prs__plot_map_y(c, v);
        if (!tick_inside(v, c->y0, c->y1)) continue;
        prs_svg_line(s, c->left, y, c->right, y, "stroke", "#e3e3e3", PRS_SVG_END);
        prs_svg_line(s, c->left - 5, y, c->left, y, "stroke", "#333", PRS_SVG_END);
        prs_ticks_label(&c->yt, i, buf, sizeof buf);
        ylabel_w = fmax(ylabel_w, prs_svg_text_width(buf, TICK_PX));
        prs__plot_draw_text(s, c->left - 8, y + 4, buf, &tick_y);
    }
    prs_svg_rect(s, c->left, c->top, c->right - c->left, c->bottom - c->top, "fill", "none",
                 "stroke", "#333", PRS_SVG_END);
    text_style at = {AXIS_TITLE_PX, "middle", "#111", 0, 0};
    prs__plot_draw_text(s, (c->left + c->right) / 2, c->bottom + 44, xlabel, &at);
    text_style yt = {AXIS_TITLE_PX, "middle", "#111", 0, -90};
    prs__plot_draw_text(s, c->left - ylabel_w - 22, (c->top + c->bottom) / 2, ylabel, &yt);
}

void prs__plot_range_add(range *r, double v)
{
    if (!isfinite(v)) return;
    if (v < r->lo) r->lo = v;
    if (v > r->hi) r->hi = v;
}

static int series_ok(const prs_plot_series *p)
{
    return p->n == 0 || (p->x && p->y);
}

/* Pixel-space points of a series, thinned to at least min_px apart (the last point is kept).
 * Returns the number kept; *out is malloc'ed (NULL if none or out of memory: *oom set). */
static size_t thin_points(const chart *c, const prs_plot_series *p, double min_px, double **out,
                          int *oom)
{
    *out = NULL;
    if (p->n == 0) return 0;
    double *xy = malloc(sizeof *xy * 2 * p->n);
    if (!xy) {
        *oom = 1;
        return 0;
    }
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (!isfinite(p->x[i]) || !isfinite(p->y[i])) continue;
        double x = prs__plot_map_x(c, p->x[i]), y = prs__plot_map_y(c, p->y[i]);
        int last = i + 1 == p->n;
        if (k > 0 && !last && fabs(x - xy[2 * k - 2]) < min_px && fabs(y - xy[2 * k - 1]) < min_px)
            continue;
        if (k > 1 && last && fabs(x - xy[2 * k - 2]) < min_px && fabs(y - xy[2 * k - 1]) < min_px)
            k--; /* replace the previous point by the last one */
        xy[2 * k] = x;
        xy[2 * k + 1] = y;
        k++;
    }
    *out = xy;
    return k;
}

static int draw_polyline(prs_svg *s, const chart *c, const prs_plot_series *p, const char *color,
                         double width, const char *dash)
{
    double *xy;
    int oom = 0;
    size_t k = thin_points(c, p, 1.0, &xy, &oom);
    if (oom) return PRS_ENOMEM;
    if (k == 0) {
        free(xy);
        return 0;
    }
    char *pts = malloc(k * 20 + 1);
    if (!pts) {
        free(xy);
        return PRS_ENOMEM;
    }
    size_t len = 0;
    for (size_t i = 0; i < k; i++)
        len += (size_t)sprintf(pts + len, "%s%.1f,%.1f", i ? " " : "", xy[2 * i], xy[2 * i + 1]);
    prs_svg_begin(s, "polyline");
    prs_svg_attr(s, "points", pts);
    prs_svg_attrs(s, "fill", "none", "stroke", color, "stroke-linejoin", "round", PRS_SVG_END);
    prs_svg_attr_num(s, "stroke-width", width);
    if (dash) prs_svg_attr(s, "stroke-dasharray", dash);
    prs_svg_end(s);
    free(pts);
    free(xy);
    return 0;
}

/* Canvas and plot area of an x-y chart with a legend of width legend_w on the right. */
#define CHART_W 900.0

static void chart_frame(chart *c, double legend_w, int has_subtitle, double top_extra)
{
    c->left = 92;
    c->top = (has_subtitle ? 64 : 48) + top_extra;
    c->right = CHART_W - legend_w - 28;
    if (c->right < 420) c->right = 420;
    c->bottom = CHART_H - 64;
}

static double chart_width(const chart *c, double legend_w)
{
    return fmax(CHART_W, c->right + legend_w + 28);
}

/* An axis over [lo, hi] widened by pad_lo and pad_hi (fractions of the range) so no point
 * sits on the frame, with nice ticks inside it. A zero-width range gets the ticks' span. */
int prs__plot_chart_axis(double lo, double hi, double pad_lo, double pad_hi, int target, double *a0,
                         double *a1, prs_ticks *t)
{
    double span = hi - lo;
    *a0 = lo - span * pad_lo;
    *a1 = hi + span * pad_hi;
    int rc = prs_nice_ticks(*a0, *a1, target, t);
    if (rc == 0 && !(*a1 > *a0)) {
        *a0 = t->lo;
        *a1 = t->hi;
    }
    return rc;
}

/* How many samples of a series' polyline (every 2 px along each segment) fall in a box. */
static double series_hits(const chart *c, const prs_plot_series *p, double bx, double by, double w,
                          double h)
{
    double hits = 0, px = 0, py = 0;
    int have = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (!isfinite(p->x[i]) || !isfinite(p->y[i])) continue;
        double x = prs__plot_map_x(c, p->x[i]), y = prs__plot_map_y(c, p->y[i]);
        double len = have ? hypot(x - px, y - py) : 0;
        int steps = len > 2 ? (int)fmin(ceil(len / 2), 1000) : 1;
        for (int k = 1; k <= steps; k++) {
            double sx = have ? px + (x - px) * k / steps : x,
                   sy = have ? py + (y - py) * k / steps : y;
            if (sx >= bx && sx <= bx + w && sy >= by && sy <= by + h) hits += 1;
        }
        px = x;
        py = y;
        have = 1;
    }
    return hits;
}

/* ---- frontier --------------------------------------------------------------------------- */

static const marker_shape baseline_shapes[] = {MARK_SQUARE,        MARK_DIAMOND, MARK_TRIANGLE,
                                               MARK_TRIANGLE_DOWN, MARK_CROSS,   MARK_PLUS};
static const char *const baseline_colors[] = {"#000000", "#CC79A7", "#009E73",
                                              "#56B4E9", "#D55E00", "#999999"};
#define MAX_BASELINES 6
#define MAX_CURVES 4
static const char *const curve_colors[] = {"#56B4E9", "#CC79A7", "#999999", "#000000"};
static const char *const curve_dashes[] = {"7 4", "2 3", "9 3 2 3", "4 4"};

static int has_tmin(const prs_frontier_plot *p)
{
    return p->tmin_s > 0 && isfinite(p->tmin_s);
}

static int has_tstar(const prs_frontier_plot *p)
{
    return p->tstar_s > 0 && isfinite(p->tstar_s);
}

/* Check p; the data's ranges (the T_min and T* lines included) and the series drawn as lines in
 * ser (predicted, evaluated, the curves). 0 or an error. */
static int frontier_check(const prs_frontier_plot *p, const prs_plot_series **ser, range *xr,
                          range *yr, prs_error *err)
{
    if (!series_ok(&p->predicted) || !series_ok(&p->evaluated) || (p->nbaselines && !p->baselines))
        return prs_error_set(err, PRS_EINVAL, "plot: a series has points but no arrays");
    if (p->nbaselines > MAX_BASELINES)
        return prs_error_set(err, PRS_EINVAL, "plot: at most %d baselines", MAX_BASELINES);
    if (p->ncurves > MAX_CURVES || (p->ncurves && !p->curves))
        return prs_error_set(err, PRS_EINVAL, "plot: at most %d curves", MAX_CURVES);
    ser[0] = &p->predicted;
    ser[1] = &p->evaluated;
    for (size_t k = 0; k < p->ncurves; k++) {
        if (!series_ok(&p->curves[k]))
            return prs_error_set(err, PRS_EINVAL, "plot: a series has points but no arrays");
        ser[2 + k] = &p->curves[k];
    }
    for (size_t k = 0; k < 2 + p->ncurves; k++)
        for (size_t i = 0; i < ser[k]->n; i++)
            if (isfinite(ser[k]->x[i]) && isfinite(ser[k]->y[i])) {
                prs__plot_range_add(xr, ser[k]->x[i]);
                prs__plot_range_add(yr, ser[k]->y[i]);
            }
    for (size_t i = 0; i < p->nbaselines; i++)
        if (isfinite(p->baselines[i].x) && isfinite(p->baselines[i].y)) {
            prs__plot_range_add(xr, p->baselines[i].x);
            prs__plot_range_add(yr, p->baselines[i].y);
        }
    if (has_tmin(p)) prs__plot_range_add(xr, p->tmin_s);
    if (has_tstar(p)) prs__plot_range_add(xr, p->tstar_s);
    if (!(xr->lo <= xr->hi) || !(yr->lo <= yr->hi))
        return prs_error_set(err, PRS_EINVAL, "plot: the frontier has no finite points");

    return 0;
}

/* The legend's entries (le: 4 + MAX_BASELINES + MAX_CURVES); their number. */
static size_t frontier_legend(const prs_frontier_plot *p, legend_entry *le, const char *tmin_label,
                              const char *tstar_label)
{
    size_t nle = 0;
    if (p->predicted.n)
        le[nle++] = (legend_entry){p->predicted.label ? p->predicted.label : "predicted",
                                   "#0072B2",
                                   NULL,
                                   2,
                                   MARK_NONE,
                                   0,
                                   NULL};
    if (p->evaluated.n)
        le[nle++] = (legend_entry){p->evaluated.label ? p->evaluated.label : "evaluated",
                                   "#E69F00",
                                   NULL,
                                   0,
                                   MARK_CIRCLE,
                                   0,
                                   NULL};
    for (size_t i = 0; i < p->ncurves; i++)
        le[nle++] = (legend_entry){p->curves[i].label ? p->curves[i].label : "curve",
                                   curve_colors[i],
                                   curve_dashes[i],
                                   1.5,
                                   MARK_CIRCLE,
                                   1,
                                   NULL};
    for (size_t i = 0; i < p->nbaselines; i++)
        le[nle++] = (legend_entry){p->baselines[i].label ? p->baselines[i].label : "baseline",
                                   baseline_colors[i],
                                   NULL,
                                   0,
                                   baseline_shapes[i],
                                   1,
                                   NULL};
    if (has_tmin(p)) le[nle++] = (legend_entry){tmin_label, "#555", "6 4", 1.5, MARK_NONE, 0, NULL};
    if (has_tstar(p))
        le[nle++] = (legend_entry){tstar_label, "#009E73", "2 3", 2, MARK_NONE, 0, NULL};

    return nle;
}

static void draw_time_marks(prs_svg *s, const chart *c, const prs_frontier_plot *p)
{
    /* Markers for T_min and T*: dashed verticals, named just above the plot area. */
    text_style ml = {LEGEND_PX - 0.5, "end", "#444", 0, 0};
    if (has_tmin(p)) {
        double x = prs__plot_map_x(c, p->tmin_s);
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#555", "stroke-width", "1.5",
                     "stroke-dasharray", "6 4", PRS_SVG_END);
        prs__plot_draw_text(s, x, c->top - 6, "T_{min}", &ml);
    }
    if (has_tstar(p)) {
        double x = prs__plot_map_x(c, p->tstar_s);
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#009E73", "stroke-width", "2",
                     "stroke-dasharray", "2 3", PRS_SVG_END);
        ml.anchor = "start";
        ml.fill = "#00704f";
        prs__plot_draw_text(s, x + 2, c->top - 6, "T*", &ml);
    }
}

/* The curves with their markers, the predicted line, the evaluated points (thinned). */
static int draw_frontier_series(prs_svg *s, const chart *c, const prs_frontier_plot *p)
{
    int rc = 0;
    for (size_t k = 0; k < p->ncurves && !rc; k++) {
        rc = draw_polyline(s, c, &p->curves[k], curve_colors[k], 1.5, curve_dashes[k]);
        double *cxy = NULL;
        int coom = 0;
        size_t ck = rc ? 0 : thin_points(c, &p->curves[k], 3.0, &cxy, &coom);
        if (coom) rc = PRS_ENOMEM;
        for (size_t i = 0; i < ck; i++)
            prs__plot_draw_marker(s, MARK_CIRCLE, cxy[2 * i], cxy[2 * i + 1], 4, curve_colors[k],
                                  1);
        free(cxy);
    }
    if (!rc) rc = draw_polyline(s, c, &p->predicted, "#0072B2", 2, NULL);
    double *xy = NULL;
    int oom = 0;
    size_t k = rc ? 0 : thin_points(c, &p->evaluated, 7.0, &xy, &oom);
    if (oom) rc = PRS_ENOMEM;
    if (k) {
        prs_svg_begin(s, "g");
        prs_svg_attrs(s, "fill", "none", "stroke", "#E69F00", "stroke-width", "1.2", PRS_SVG_END);
        prs_svg_open(s);
        for (size_t i = 0; i < k; i++) {
            prs_svg_begin(s, "circle");
            prs_svg_attr_num(s, "cx", xy[2 * i]);
            prs_svg_attr_num(s, "cy", xy[2 * i + 1]);
            prs_svg_attr(s, "r", "2.6");
            prs_svg_end(s);
        }
        prs_svg_close(s);
    }
    free(xy);

    return rc;
}

/* Baselines: a marker and its name beside it, at whichever of eight places around the
 * marker covers the fewest data (curves sampled every 2 px, other markers), stays inside
 * the plot area and clears the names already placed; a white halo keeps grid lines from
 * crossing the letters. */
static void draw_baselines(prs_svg *s, const chart *c, const prs_frontier_plot *p,
                           const prs_plot_series *const *ser)
{
    double boxes[MAX_BASELINES][4];
    size_t nboxes = 0;
    text_style bl = {LEGEND_PX - 0.5, "start", "#111", 0, 0};
    for (size_t i = 0; i < p->nbaselines; i++) {
        const prs_plot_point *b = &p->baselines[i];
        if (!isfinite(b->x) || !isfinite(b->y)) continue;
        double x = prs__plot_map_x(c, b->x), y = prs__plot_map_y(c, b->y);
        prs__plot_draw_marker(s, baseline_shapes[i], x, y, 11, baseline_colors[i], 1);
        const char *name = b->label ? b->label : "baseline";
        double w = prs__plot_rich_width(name, bl.size_px), h = 14;
        const double cand[8][2] = {
            {x + 9, y - h / 2}, {x - 9 - w, y - h / 2}, {x - w / 2, y - 9 - h}, {x - w / 2, y + 9},
            {x + 6, y - 6 - h}, {x + 6, y + 6},         {x - 6 - w, y - 6 - h}, {x - 6 - w, y + 6}};
        int pick = 0;
        double best = INFINITY;
        for (int ci = 0; ci < 8; ci++) {
            double bx = cand[ci][0], by = cand[ci][1], score = 0;
            if (bx < c->left + 2 || bx + w > c->right - 2 || by < c->top + 2 ||
                by + h > c->bottom - 2)
                score += 1e6;
            for (size_t j = 0; j < nboxes; j++)
                if (bx < boxes[j][0] + boxes[j][2] && boxes[j][0] < bx + w &&
                    by < boxes[j][1] + boxes[j][3] && boxes[j][1] < by + h)
                    score += 1e4;
            for (size_t k2 = 0; k2 < 2 + p->ncurves; k2++)
                score += series_hits(c, ser[k2], bx - 2, by - 2, w + 4, h + 4);
            for (size_t j = 0; j < p->nbaselines; j++) {
                double mx = prs__plot_map_x(c, p->baselines[j].x),
                       my = prs__plot_map_y(c, p->baselines[j].y);
                if (mx > bx - 7 && mx < bx + w + 7 && my > by - 7 && my < by + h + 7) score += 100;
            }
            if (score < best) {
                best = score;
                pick = ci;
            }
        }
        double bx = cand[pick][0], by = cand[pick][1];
        if (bx + w > c->right - 2) bx = c->right - 2 - w;
        if (bx < c->left + 2) bx = c->left + 2;
        text_style halo = bl;
        halo.fill = NULL;
        prs_svg_begin(s, "g");
        prs_svg_attrs(s, "stroke", "white", "stroke-width", "4", "stroke-linejoin", "round", "fill",
                      "white", PRS_SVG_END);
        prs_svg_open(s);
        prs__plot_draw_text(s, bx, by + 11, name, &halo);
        prs_svg_close(s);
        prs__plot_draw_text(s, bx, by + 11, name, &bl);
        boxes[nboxes][0] = bx;
        boxes[nboxes][1] = by;
        boxes[nboxes][2] = w;
        boxes[nboxes][3] = h;
        nboxes++;
    }
}

int prs_plot_frontier(FILE *out, const prs_frontier_plot *p, prs_error *err)
{
    if (!out || !p) return prs_error_set(err, PRS_EINVAL, "plot: no output or no data");
    range xr = {INFINITY, -INFINITY}, yr = {INFINITY, -INFINITY};
    const prs_plot_series *ser[2 + MAX_CURVES];
    int rc = frontier_check(p, ser, &xr, &yr, err);
    if (rc) return rc;
    char tmin_label[96], tstar_label[96];
    snprintf(tmin_label, sizeof tmin_label, "T_{min} = %.4g s (fastest plan)", p->tmin_s);
    snprintf(tstar_label, sizeof tstar_label, "T* = %.4g s (least energy)", p->tstar_s);
    legend_entry le[4 + MAX_BASELINES + MAX_CURVES];
    size_t nle = frontier_legend(p, le, tmin_label, tstar_label);
    chart c;
    double lw = prs__plot_legend_width(le, nle);
    chart_frame(&c, lw, p->subtitle != NULL, 14);
    if (prs__plot_chart_axis(xr.lo, xr.hi, 0.03, 0.03, 7, &c.x0, &c.x1, &c.xt) ||
        prs__plot_chart_axis(yr.lo, yr.hi, 0.06, 0.06, 6, &c.y0, &c.y1, &c.yt))
        return prs_error_set(err, PRS_EINVAL, "plot: cannot scale the axes");
    double width = chart_width(&c, lw);
    const char *title = p->title ? p->title : "Iteration time-energy frontier";
    prs_svg *s = prs_svg_new(out, width, CHART_H, title);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    prs__plot_draw_page(s, width, CHART_H, title, p->subtitle);
    prs__plot_draw_axes(s, &c, "Iteration time (s)", "Iteration energy (J)");
    draw_time_marks(s, &c, p);
    rc = draw_frontier_series(s, &c, p);
    draw_baselines(s, &c, p, ser);
    prs__plot_draw_legend(s, c.right + 16, c.top, le, nle);
    prs_svg_close(s);
    int frc = prs_svg_finish(s, err);
    if (rc) return prs_error_set(err, rc, "plot: out of memory");
    return frc;
}

/* ---- savings ---------------------------------------------------------------------------- */

#define MAX_SERIES 10

int prs_plot_savings(FILE *out, const prs_savings_plot *p, prs_error *err)
{
    if (!out || !p || (p->nseries && !p->series))
        return prs_error_set(err, PRS_EINVAL, "plot: no output or no data");
    if (p->nseries > MAX_SERIES)
        return prs_error_set(err, PRS_EINVAL, "plot: at most %d series", MAX_SERIES);
    range xr = {INFINITY, -INFINITY}, yr = {INFINITY, -INFINITY};
    legend_entry le[MAX_SERIES];
    for (size_t k = 0; k < p->nseries; k++) {
        const prs_plot_series *ser = &p->series[k];
        if (!series_ok(ser))
            return prs_error_set(err, PRS_EINVAL, "plot: a series has points but no arrays");
        for (size_t i = 0; i < ser->n; i++)
            if (isfinite(ser->x[i]) && isfinite(ser->y[i])) {
                prs__plot_range_add(&xr, ser->x[i]);
                prs__plot_range_add(&yr, ser->y[i]);
            }
        le[k] = (legend_entry){ser->label ? ser->label : "series",
                               prs__plot_palette[k],
                               prs__plot_dashes[k],
                               k == 0 ? 3 : 2,
                               MARK_NONE,
                               0,
                               NULL};
    }
    if (!(xr.lo <= xr.hi)) return prs_error_set(err, PRS_EINVAL, "plot: no finite points to draw");
    if (yr.lo > 0) yr.lo = 0; /* savings read against zero */
    if (yr.hi < 0) yr.hi = 0;
    chart c;
    double lw = prs__plot_legend_width(le, p->nseries);
    chart_frame(&c, lw, p->subtitle != NULL, 0);
    if (prs__plot_chart_axis(xr.lo, xr.hi, 0, 0, 8, &c.x0, &c.x1, &c.xt) ||
        prs__plot_chart_axis(yr.lo, yr.hi, 0.04, 0.05, 7, &c.y0, &c.y1, &c.yt))
        return prs_error_set(err, PRS_EINVAL, "plot: cannot scale the axes");
    double width = chart_width(&c, lw);
    const char *title = p->title ? p->title : "Energy savings vs straggler slowdown";
    prs_svg *s = prs_svg_new(out, width, CHART_H, title);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    prs__plot_draw_page(s, width, CHART_H, title, p->subtitle);
    prs__plot_draw_axes(s, &c,
                        p->x_label ? p->x_label : "Straggler slowdown T\xe2\x80\xb2 / T_{min}",
                        p->y_label ? p->y_label : "Energy saving (%)");
    if (c.y0 < 0 && c.y1 > 0)
        prs_svg_line(s, c.left, prs__plot_map_y(&c, 0), c.right, prs__plot_map_y(&c, 0), "stroke",
                     "#777", PRS_SVG_END);
    int rc = 0;
    /* Perseus (series 0) last, so it is on top. */
    for (size_t k = p->nseries; k-- > 0 && !rc;)
        rc = draw_polyline(s, &c, &p->series[k], prs__plot_palette[k], k == 0 ? 3 : 2,
                           prs__plot_dashes[k]);
    prs__plot_draw_legend(s, c.right + 16, c.top, le, p->nseries);
    prs_svg_close(s);
    int frc = prs_svg_finish(s, err);
    if (rc) return prs_error_set(err, rc, "plot: out of memory");
    return frc;
}
