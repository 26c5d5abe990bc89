/* The plots of include/perseus/plot.h: frontier, savings, pipeline timeline and noise.
 *
 * Every plot is laid out on a fixed canvas in pixels: title and subtitle on top, the plot area
 * in the middle, axis titles outside it, and legends (and the timeline's colour bar) outside the
 * plot area, so no legend can hide data whatever the data's shape. Axes use loose "nice" ticks
 * (scale.c) with light grid lines. Colours for lines and markers come from the Okabe-Ito palette,
 * which stays distinguishable under the common colour-vision deficiencies; every series also
 * differs in dash pattern or marker shape, so the plots read in greyscale too.
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

#define FONT_FAMILY "DejaVu Sans, Helvetica, Arial, sans-serif"
#define TITLE_PX 18.0
#define SUBTITLE_PX 12.5
#define AXIS_TITLE_PX 14.0
#define TICK_PX 12.0
#define LEGEND_PX 12.5

/* Okabe-Ito's eight, then two darker shades for the ninth and tenth series (which differ in
 * dash pattern from all the others anyway). */
static const char *const palette[] = {"#D55E00", "#0072B2", "#009E73", "#CC79A7", "#000000",
                                      "#E69F00", "#56B4E9", "#999999", "#8C4A00", "#004D7A"};
static const char *const dashes[] = {NULL,   "8 4", "2 3", "9 3 2 3", "4 4",
                                     "12 3", "1 2", "6 2", "3 2 8 2", "10 2 2 2 2 2"};

/* ---- text ------------------------------------------------------------------------------- */

typedef struct text_style {
    double size_px;
    const char *anchor; /* start, middle, end */
    const char *fill;
    int bold;
    double rotate_deg; /* about (x, y) */
} text_style;

/* Width of a label with "_{...}" subscripts (set at 75 %). */
static double rich_width(const char *text, double px)
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

static void draw_text(prs_svg *s, double x, double y, const char *text, const text_style *st)
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
static void draw_page(prs_svg *s, double width, double height, const char *title,
                      const char *subtitle)
{
    prs_svg_begin(s, "g");
    prs_svg_attrs(s, "font-family", FONT_FAMILY, PRS_SVG_END);
    prs_svg_open(s);
    prs_svg_rect(s, 0, 0, width, height, "fill", "white", PRS_SVG_END);
    text_style ts = {TITLE_PX, "middle", "#111", 1, 0};
    draw_text(s, width / 2, 28, title, &ts);
    if (subtitle) {
        text_style ss = {SUBTITLE_PX, "middle", "#555", 0, 0};
        draw_text(s, width / 2, 48, subtitle, &ss);
    }
}

/* ---- markers and legend ----------------------------------------------------------------- */

typedef enum marker_shape {
    MARK_NONE,
    MARK_CIRCLE,
    MARK_SQUARE,
    MARK_DIAMOND,
    MARK_TRIANGLE,
    MARK_TRIANGLE_DOWN,
    MARK_CROSS,
    MARK_PLUS
} marker_shape;

static void draw_marker(prs_svg *s, marker_shape shape, double x, double y, double size,
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

typedef struct legend_entry {
    const char *label;
    const char *color;
    const char *dash; /* line entries: NULL for solid */
    double line_px;   /* 0: no line sample */
    marker_shape marker;
    int filled;
    const char *swatch_fill; /* rectangle swatch (fill or url(#...)); NULL for none */
} legend_entry;

#define LEGEND_SAMPLE 30.0
#define LEGEND_ROW 20.0

static double legend_width(const legend_entry *e, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++)
        w = fmax(w, rich_width(e[i].label, LEGEND_PX));
    return w + LEGEND_SAMPLE + 8 + 20;
}

/* A framed legend with its top-left corner at (x, y). */
static void draw_legend(prs_svg *s, double x, double y, const legend_entry *e, size_t n)
{
    double w = legend_width(e, n), h = (double)n * LEGEND_ROW + 10;
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
            draw_marker(s, e[i].marker, sx + LEGEND_SAMPLE / 2, cy, 8, e[i].color, e[i].filled);
        draw_text(s, sx + LEGEND_SAMPLE + 8, cy + 4.5, e[i].label, &ts);
    }
}

/* ---- axes ------------------------------------------------------------------------------- */

typedef struct chart {
    double left, top, right, bottom; /* plot area in pixels */
    double x0, x1, y0, y1;           /* data shown: the plot area's edges */
    prs_ticks xt, yt;                /* ticks; only those within [x0, x1], [y0, y1] are drawn */
} chart;

static double map_x(const chart *c, double x)
{
    return c->left + (x - c->x0) / (c->x1 - c->x0) * (c->right - c->left);
}

static double map_y(const chart *c, double y)
{
    return c->bottom - (y - c->y0) / (c->y1 - c->y0) * (c->bottom - c->top);
}

static int tick_inside(double v, double lo, double hi)
{
    double eps = (hi - lo) * 1e-9;
    return v >= lo - eps && v <= hi + eps;
}

/* Grid, frame, tick labels and axis titles. */
static void draw_axes(prs_svg *s, const chart *c, const char *xlabel, const char *ylabel)
{
    char buf[64];
    text_style tick_x = {TICK_PX, "middle", "#333", 0, 0}, tick_y = {TICK_PX, "end", "#333", 0, 0};
    prs_svg_rect(s, c->left, c->top, c->right - c->left, c->bottom - c->top, "fill", "white",
                 PRS_SVG_END);
    double ylabel_w = 0;
    for (int i = 0; i < c->xt.count; i++) {
        double v = c->xt.lo + i * c->xt.step, x = map_x(c, v);
        if (!tick_inside(v, c->x0, c->x1)) continue;
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#e3e3e3", PRS_SVG_END);
        prs_svg_line(s, x, c->bottom, x, c->bottom + 5, "stroke", "#333", PRS_SVG_END);
        draw_text(s, x, c->bottom + 19, prs_ticks_label(&c->xt, i, buf, sizeof buf), &tick_x);
    }
    for (int i = 0; i < c->yt.count; i++) {
        double v = c->yt.lo + i * c->yt.step, y = map_y(c, v);
        if (!tick_inside(v, c->y0, c->y1)) continue;
        prs_svg_line(s, c->left, y, c->right, y, "stroke", "#e3e3e3", PRS_SVG_END);
        prs_svg_line(s, c->left - 5, y, c->left, y, "stroke", "#333", PRS_SVG_END);
        prs_ticks_label(&c->yt, i, buf, sizeof buf);
        ylabel_w = fmax(ylabel_w, prs_svg_text_width(buf, TICK_PX));
        draw_text(s, c->left - 8, y + 4, buf, &tick_y);
    }
    prs_svg_rect(s, c->left, c->top, c->right - c->left, c->bottom - c->top, "fill", "none",
                 "stroke", "#333", PRS_SVG_END);
    text_style at = {AXIS_TITLE_PX, "middle", "#111", 0, 0};
    draw_text(s, (c->left + c->right) / 2, c->bottom + 44, xlabel, &at);
    text_style yt = {AXIS_TITLE_PX, "middle", "#111", 0, -90};
    draw_text(s, c->left - ylabel_w - 22, (c->top + c->bottom) / 2, ylabel, &yt);
}

/* Data range accumulator. */
typedef struct range {
    double lo, hi;
} range;

static void range_add(range *r, double v)
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
        double x = map_x(c, p->x[i]), y = map_y(c, p->y[i]);
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
#define CHART_H 540.0

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
static int chart_axis(double lo, double hi, double pad_lo, double pad_hi, int target, double *a0,
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
        double x = map_x(c, p->x[i]), y = map_y(c, p->y[i]);
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
                range_add(xr, ser[k]->x[i]);
                range_add(yr, ser[k]->y[i]);
            }
    for (size_t i = 0; i < p->nbaselines; i++)
        if (isfinite(p->baselines[i].x) && isfinite(p->baselines[i].y)) {
            range_add(xr, p->baselines[i].x);
            range_add(yr, p->baselines[i].y);
        }
    if (has_tmin(p)) range_add(xr, p->tmin_s);
    if (has_tstar(p)) range_add(xr, p->tstar_s);
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
        double x = map_x(c, p->tmin_s);
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#555", "stroke-width", "1.5",
                     "stroke-dasharray", "6 4", PRS_SVG_END);
        draw_text(s, x, c->top - 6, "T_{min}", &ml);
    }
    if (has_tstar(p)) {
        double x = map_x(c, p->tstar_s);
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#009E73", "stroke-width", "2",
                     "stroke-dasharray", "2 3", PRS_SVG_END);
        ml.anchor = "start";
        ml.fill = "#00704f";
        draw_text(s, x + 2, c->top - 6, "T*", &ml);
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
            draw_marker(s, MARK_CIRCLE, cxy[2 * i], cxy[2 * i + 1], 4, curve_colors[k], 1);
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
        double x = map_x(c, b->x), y = map_y(c, b->y);
        draw_marker(s, baseline_shapes[i], x, y, 11, baseline_colors[i], 1);
        const char *name = b->label ? b->label : "baseline";
        double w = rich_width(name, bl.size_px), h = 14;
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
                double mx = map_x(c, p->baselines[j].x), my = map_y(c, p->baselines[j].y);
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
        draw_text(s, bx, by + 11, name, &halo);
        prs_svg_close(s);
        draw_text(s, bx, by + 11, name, &bl);
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
    double lw = legend_width(le, nle);
    chart_frame(&c, lw, p->subtitle != NULL, 14);
    if (chart_axis(xr.lo, xr.hi, 0.03, 0.03, 7, &c.x0, &c.x1, &c.xt) ||
        chart_axis(yr.lo, yr.hi, 0.06, 0.06, 6, &c.y0, &c.y1, &c.yt))
        return prs_error_set(err, PRS_EINVAL, "plot: cannot scale the axes");
    double width = chart_width(&c, lw);
    const char *title = p->title ? p->title : "Iteration time-energy frontier";
    prs_svg *s = prs_svg_new(out, width, CHART_H, title);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    draw_page(s, width, CHART_H, title, p->subtitle);
    draw_axes(s, &c, "Iteration time (s)", "Iteration energy (J)");
    draw_time_marks(s, &c, p);
    rc = draw_frontier_series(s, &c, p);
    draw_baselines(s, &c, p, ser);
    draw_legend(s, c.right + 16, c.top, le, nle);
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
                range_add(&xr, ser->x[i]);
                range_add(&yr, ser->y[i]);
            }
        le[k] = (legend_entry){ser->label ? ser->label : "series",
                               palette[k],
                               dashes[k],
                               k == 0 ? 3 : 2,
                               MARK_NONE,
                               0,
                               NULL};
    }
    if (!(xr.lo <= xr.hi)) return prs_error_set(err, PRS_EINVAL, "plot: no finite points to draw");
    if (yr.lo > 0) yr.lo = 0; /* savings read against zero */
    if (yr.hi < 0) yr.hi = 0;
    chart c;
    double lw = legend_width(le, p->nseries);
    chart_frame(&c, lw, p->subtitle != NULL, 0);
    if (chart_axis(xr.lo, xr.hi, 0, 0, 8, &c.x0, &c.x1, &c.xt) ||
        chart_axis(yr.lo, yr.hi, 0.04, 0.05, 7, &c.y0, &c.y1, &c.yt))
        return prs_error_set(err, PRS_EINVAL, "plot: cannot scale the axes");
    double width = chart_width(&c, lw);
    const char *title = p->title ? p->title : "Energy savings vs straggler slowdown";
    prs_svg *s = prs_svg_new(out, width, CHART_H, title);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    draw_page(s, width, CHART_H, title, p->subtitle);
    draw_axes(s, &c, p->x_label ? p->x_label : "Straggler slowdown T\xe2\x80\xb2 / T_{min}",
              p->y_label ? p->y_label : "Energy saving (%)");
    if (c.y0 < 0 && c.y1 > 0)
        prs_svg_line(s, c.left, map_y(&c, 0), c.right, map_y(&c, 0), "stroke", "#777", PRS_SVG_END);
    int rc = 0;
    /* Perseus (series 0) last, so it is on top. */
    for (size_t k = p->nseries; k-- > 0 && !rc;)
        rc = draw_polyline(s, &c, &p->series[k], palette[k], k == 0 ? 3 : 2, dashes[k]);
    draw_legend(s, c.right + 16, c.top, le, p->nseries);
    prs_svg_close(s);
    int frc = prs_svg_finish(s, err);
    if (rc) return prs_error_set(err, rc, "plot: out of memory");
    return frc;
}

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
            range_add(yr, st[1]);
            range_add(yr, st[2]);
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
        prs_svg_line(s, c->left, map_y(c, 0), c->right, map_y(c, 0), "stroke", "#777", PRS_SVG_END);
    int nser = nmodels * 2;
    for (int m = 0; m < nmodels; m++)
        for (int pl = 0; pl < 2; pl++) {
            double off = ((double)(m * 2 + pl) - (nser - 1) / 2.0) * 5.0;
            double px = NAN, py = NAN;
            for (size_t i = 0; i < p->nlevels; i++) {
                if (model_of[i] != m) continue;
                const double *st = stats + (i * 2 + (size_t)pl) * 3;
                if (!isfinite(st[0])) continue;
                double x = map_x(c, p->levels[i].jitter_pct) + off, y = map_y(c, st[0]);
                prs_svg_line(s, x, map_y(c, st[1]), x, map_y(c, st[2]), "stroke", palette[pl],
                             "stroke-width", "1.5", PRS_SVG_END);
                if (isfinite(px)) {
                    prs_svg_begin(s, "line");
                    prs_svg_attr_num(s, "x1", px);
                    prs_svg_attr_num(s, "y1", py);
                    prs_svg_attr_num(s, "x2", x);
                    prs_svg_attr_num(s, "y2", y);
                    prs_svg_attrs(s, "stroke", palette[pl], "stroke-width", "2", PRS_SVG_END);
                    if (dashes[m]) prs_svg_attr(s, "stroke-dasharray", dashes[m]);
                    prs_svg_end(s);
                }
                draw_marker(s, shapes[pl], x, y, 8, palette[pl], 1);
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
    return chart_axis(xr.lo, xr.hi, 0.06, 0.06, 6, &c->x0, &c->x1, &c->xt) ||
           chart_axis(yr.lo, yr.hi, 0.04, 0.06, 7, &c->y0, &c->y1, &c->yt);
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
        range_add(&xr, p->levels[i].jitter_pct);
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
            le[k] = (legend_entry){
                labels[k], palette[pl], dashes[m], 2, pl ? MARK_SQUARE : MARK_CIRCLE, 1, NULL};
        }
    double lw = legend_width(le, (size_t)nm * 2);
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
    draw_page(s, NOISE_W, CHART_H, title, p->subtitle);
    text_style pt = {AXIS_TITLE_PX, "middle", "#111", 1, 0};
    draw_text(s, (co.left + co.right) / 2, co.top - 8, "Fastest plan: time over true T_{min}", &pt);
    draw_text(s, (cg.left + cg.right) / 2, cg.top - 8, "Fastest plan: energy regret", &pt);
    draw_axes(s, &co, "Time jitter per measurement (%)", "Overshoot (%)");
    draw_axes(s, &cg, "Time jitter per measurement (%)", "Regret (%)");
    noise_panel(s, &co, p, stats, model_of, nm);
    noise_panel(s, &cg, p, stats + p->nlevels * 6, model_of, nm);
    draw_legend(s, cg.right + 16, cg.top, le, (size_t)nm * 2);
    prs_svg_close(s);
    free(stats);
    return prs_svg_finish(s, err);
}

/* ---- timeline --------------------------------------------------------------------------- */

#define TL_W 1000.0
#define TL_ROW 30.0
#define TL_BAR 24.0

static void hex_color(prs_rgb c, char *buf, size_t n)
{
    snprintf(buf, n, "#%02x%02x%02x", c.r, c.g, c.b);
}

static prs_rgb op_color(const prs_timeline_op *o, int clk_min, int clk_max, double span)
{
    return prs_colormap_viridis(clk_max == clk_min ? 1.0 : (o->freq_mhz - clk_min) / span);
}

/* Check p; the clock range of the colour scale (p's, else the operations'). 0 or an error. */
static int timeline_check(const prs_timeline_plot *p, int *lo, int *hi, prs_error *err)
{
    if (!p || (p->nops && !p->ops))
        return prs_error_set(err, PRS_EINVAL, "plot: no output or no data");
    if (p->stages < 1 || p->stages > 4096)
        return prs_error_set(err, PRS_EINVAL, "plot: stages must be 1..4096, got %d", p->stages);
    if (!(p->time_s > 0) || !isfinite(p->time_s))
        return prs_error_set(err, PRS_EINVAL, "plot: the iteration time must be positive");
    int clk_min = p->clock_min_mhz, clk_max = p->clock_max_mhz;
    if (clk_min == 0 && clk_max == 0) {
        clk_min = INT_MAX;
        clk_max = 0;
        for (size_t i = 0; i < p->nops; i++) {
            if (p->ops[i].freq_mhz < clk_min) clk_min = p->ops[i].freq_mhz;
            if (p->ops[i].freq_mhz > clk_max) clk_max = p->ops[i].freq_mhz;
        }
        if (p->nops == 0) clk_min = clk_max = 1;
    }
    if (clk_min > clk_max || clk_min < 0)
        return prs_error_set(err, PRS_EINVAL, "plot: bad clock range %d..%d MHz", clk_min, clk_max);
    *lo = clk_min;
    *hi = clk_max;
    for (size_t i = 0; i < p->nops; i++) {
        const prs_timeline_op *o = &p->ops[i];
        if (o->stage < 0 || o->stage >= p->stages || !isfinite(o->start_s) || !isfinite(o->end_s) ||
            o->end_s < o->start_s)
            return prs_error_set(err, PRS_EINVAL, "plot: timeline operation %zu is invalid", i);
    }
    return 0;
}

/* The hatch patterns and the colour bar's gradient. */
static void timeline_defs(prs_svg *s)
{
    prs_svg_begin(s, "defs");
    prs_svg_open(s);
    prs_svg_begin(s, "pattern");
    prs_svg_attrs(s, "id", "hatch", "width", "6", "height", "6", "patternUnits", "userSpaceOnUse",
                  "patternTransform", "rotate(45)", PRS_SVG_END);
    prs_svg_open(s);
    prs_svg_line(s, 0, 0, 0, 6, "stroke", "white", "stroke-width", "2", "stroke-opacity", "0.55",
                 PRS_SVG_END);
    prs_svg_close(s);
    prs_svg_begin(s, "pattern");
    prs_svg_attrs(s, "id", "hatch-dark", "width", "6", "height", "6", "patternUnits",
                  "userSpaceOnUse", "patternTransform", "rotate(45)", PRS_SVG_END);
    prs_svg_open(s);
    prs_svg_rect(s, 0, 0, 6, 6, "fill", "#21908d", PRS_SVG_END);
    prs_svg_line(s, 0, 0, 0, 6, "stroke", "white", "stroke-width", "2", "stroke-opacity", "0.55",
                 PRS_SVG_END);
    prs_svg_close(s);
    prs_svg_begin(s, "linearGradient");
    prs_svg_attrs(s, "id", "clock", "x1", "0", "y1", "1", "x2", "0", "y2", "0", PRS_SVG_END);
    prs_svg_open(s);
    for (int i = 0; i <= 16; i++) {
        char col[8];
        hex_color(prs_colormap_viridis(i / 16.0), col, sizeof col);
        prs_svg_begin(s, "stop");
        prs_svg_attrf(s, "offset", "%.4g", i / 16.0);
        prs_svg_attr(s, "stop-color", col);
        prs_svg_end(s);
    }
    prs_svg_close(s);
    prs_svg_close(s);
}

/* Legend row: forward, backward, idle. */
static void timeline_legend(prs_svg *s, const chart *c, double legend_y)
{
    legend_entry le[3] = {
        {"forward (F3 = microbatch 3)", "#21908d", NULL, 0, MARK_NONE, 0, "#21908d"},
        {"backward (B3), hatched", "#21908d", NULL, 0, MARK_NONE, 0, "url(#hatch-dark)"},
        {"idle (blocked)", "#ddd", NULL, 0, MARK_NONE, 0, "#e6e6e6"},
    };
    double lx = c->left;
    text_style ls = {LEGEND_PX, "start", "#222", 0, 0};
    for (int i = 0; i < 3; i++) {
        prs_svg_rect(s, lx, legend_y + 4, LEGEND_SAMPLE, 14, "fill", le[i].swatch_fill, "stroke",
                     "#666", "stroke-width", "0.5", PRS_SVG_END);
        draw_text(s, lx + LEGEND_SAMPLE + 6, legend_y + 15.5, le[i].label, &ls);
        lx += LEGEND_SAMPLE + 6 + rich_width(le[i].label, LEGEND_PX) + 28;
    }
}

/* One row per GPU: its idle background and name, and the time grid. */
static void timeline_rows(prs_svg *s, const chart *c, const prs_timeline_plot *p,
                          const prs_ticks *xt)
{
    char buf[64];
    text_style row_label = {TICK_PX, "end", "#333", 0, 0};
    for (int st = 0; st < p->stages; st++) {
        double y = c->top + st * TL_ROW + (TL_ROW - TL_BAR) / 2;
        prs_svg_rect(s, c->left, y, c->right - c->left, TL_BAR, "fill", "#e6e6e6", PRS_SVG_END);
        snprintf(buf, sizeof buf, "GPU %d", st);
        draw_text(s, c->left - 8, y + TL_BAR / 2 + 4, buf, &row_label);
    }
    for (int i = 0; i < xt->count; i++) {
        double v = xt->lo + i * xt->step;
        if (v > p->time_s * (1 + 1e-9)) break;
        double x = map_x(c, v);
        prs_svg_line(s, x, c->top, x, c->bottom, "stroke", "#ffffff", "stroke-width", "1",
                     PRS_SVG_END);
    }
}

/* The computations, coloured by clock, and their names where they fit. */
static void timeline_bars(prs_svg *s, const chart *c, const prs_timeline_plot *p, int clk_min,
                          int clk_max)
{
    /* Bars, then their labels, each in a group carrying the attributes they share (thousands
     * of computations at large M: this halves the file). */
    double span = fmax((double)(clk_max - clk_min), 1e-9);
    char buf[64];
    prs_svg_begin(s, "g");
    prs_svg_attrs(s, "stroke", "white", "stroke-width", "0.6", PRS_SVG_END);
    prs_svg_open(s);
    for (size_t i = 0; i < p->nops; i++) {
        const prs_timeline_op *o = &p->ops[i];
        double x0 = map_x(c, o->start_s), x1 = map_x(c, o->end_s);
        double y = c->top + o->stage * TL_ROW + (TL_ROW - TL_BAR) / 2;
        char col[8];
        hex_color(op_color(o, clk_min, clk_max, span), col, sizeof col);
        prs_svg_rect(s, x0, y, x1 - x0, TL_BAR, "fill", col, PRS_SVG_END);
        if (o->instr == PRS_BACKWARD)
            prs_svg_rect(s, x0, y, x1 - x0, TL_BAR, "fill", "url(#hatch)", PRS_SVG_END);
    }
    prs_svg_close(s);
    prs_svg_begin(s, "g");
    prs_svg_attrs(s, "font-size", "10", "font-weight", "bold", "text-anchor", "middle", "fill",
                  "#fff", PRS_SVG_END);
    prs_svg_open(s);
    for (size_t i = 0; i < p->nops; i++) {
        const prs_timeline_op *o = &p->ops[i];
        double x0 = map_x(c, o->start_s), x1 = map_x(c, o->end_s);
        double y = c->top + o->stage * TL_ROW + TL_ROW / 2 + 4;
        snprintf(buf, sizeof buf, "%c%d", o->instr == PRS_FORWARD ? 'F' : 'B', o->microbatch);
        if (prs_svg_text_width(buf, 10) + 3 > x1 - x0) continue;
        prs_rgb rgb = op_color(o, clk_min, clk_max, span);
        if (0.299 * rgb.r + 0.587 * rgb.g + 0.114 * rgb.b > 140) /* dark text on light colours */
            prs_svg_label(s, (x0 + x1) / 2, y, buf, "fill", "#000", PRS_SVG_END);
        else
            prs_svg_label(s, (x0 + x1) / 2, y, buf, PRS_SVG_END);
    }
    prs_svg_close(s);
}

/* Time axis below the rows, the iteration's end, the axis titles. */
static void timeline_axis(prs_svg *s, const chart *c, const prs_timeline_plot *p,
                          const prs_ticks *xt)
{
    char buf[64];
    text_style tick_x = {TICK_PX, "middle", "#333", 0, 0};
    prs_svg_line(s, c->left, c->bottom, c->right, c->bottom, "stroke", "#333", PRS_SVG_END);
    for (int i = 0; i < xt->count; i++) {
        double v = xt->lo + i * xt->step;
        if (v > p->time_s * (1 + 1e-9)) break;
        double x = map_x(c, v);
        prs_svg_line(s, x, c->bottom, x, c->bottom + 5, "stroke", "#333", PRS_SVG_END);
        draw_text(s, x, c->bottom + 19, prs_ticks_label(xt, i, buf, sizeof buf), &tick_x);
    }
    prs_svg_line(s, c->right, c->top - 4, c->right, c->bottom + 5, "stroke", "#333", "stroke-width",
                 "1.5", PRS_SVG_END);
    snprintf(buf, sizeof buf, "%.4g s", p->time_s);
    text_style end = {TICK_PX, "middle", "#111", 1, 0};
    draw_text(s, c->right, c->top - 8, buf, &end);
    text_style at = {AXIS_TITLE_PX, "middle", "#111", 0, 0};
    draw_text(s, (c->left + c->right) / 2, c->bottom + 44, "Time within the iteration (s)", &at);
    text_style yt = {AXIS_TITLE_PX, "middle", "#111", 0, -90};
    draw_text(s, 22, (c->top + c->bottom) / 2, "Pipeline stage", &yt);
}

/* Colour bar: SM clock, as tall as bar_h. */
static void timeline_colour_bar(prs_svg *s, const chart *c, double bar_h, int clk_min, int clk_max)
{
    double cbx = c->right + 44, cbw = 16, cbt = c->top, cbb = c->top + bar_h;
    prs_svg_rect(s, cbx, cbt, cbw, cbb - cbt, "fill", "url(#clock)", "stroke", "#333",
                 "stroke-width", "0.5", PRS_SVG_END);
    double span = fmax((double)(clk_max - clk_min), 1e-9);
    char buf[64];
    prs_ticks ct;
    if (clk_max > clk_min && prs_nice_ticks(clk_min, clk_max, 6, &ct) == 0) {
        text_style cl = {TICK_PX - 1, "start", "#333", 0, 0};
        for (int i = 0; i < ct.count; i++) {
            double v = ct.lo + i * ct.step;
            if (v < clk_min - 1e-9 || v > clk_max + 1e-9) continue;
            double y = cbb - (v - clk_min) / span * (cbb - cbt);
            prs_svg_line(s, cbx + cbw, y, cbx + cbw + 4, y, "stroke", "#333", PRS_SVG_END);
            draw_text(s, cbx + cbw + 6, y + 4, prs_ticks_label(&ct, i, buf, sizeof buf), &cl);
        }
    } else {
        text_style cl = {TICK_PX - 1, "start", "#333", 0, 0};
        snprintf(buf, sizeof buf, "%d", clk_max);
        draw_text(s, cbx + cbw + 6, cbt + 8, buf, &cl);
    }
    text_style cbt_style = {AXIS_TITLE_PX - 1, "middle", "#111", 0, -90};
    draw_text(s, cbx - 10, (cbt + cbb) / 2, "SM clock (MHz)", &cbt_style);
}

int prs_plot_timeline(FILE *out, const prs_timeline_plot *p, prs_error *err)
{
    if (!out || !p) return prs_error_set(err, PRS_EINVAL, "plot: no output or no data");
    int clk_min = 0, clk_max = 0;
    int rc = timeline_check(p, &clk_min, &clk_max, err);
    if (rc) return rc;
    /* Layout: legend row under the titles, rows of bars, time axis, colour bar on the right. */
    double legend_y = p->subtitle ? 62 : 46;
    double top = legend_y + 36;
    double plot_h = p->stages * TL_ROW;
    double bar_h = fmax(plot_h, 150);
    double height = top + bar_h + 70;
    chart c;
    c.left = 84;
    c.right = TL_W - 130;
    c.top = top;
    c.bottom = top + plot_h;
    if (prs_nice_ticks(0, p->time_s, 9, &c.xt))
        return prs_error_set(err, PRS_EINVAL, "plot: cannot scale the time axis");
    /* The axis spans exactly one iteration; ticks past its end are dropped below. */
    prs_ticks xt = c.xt;
    c.x0 = 0;
    c.x1 = p->time_s;

    const char *title = p->title ? p->title : "Pipeline timeline";
    prs_svg *s = prs_svg_new(out, TL_W, height, title);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "plot: out of memory");
    timeline_defs(s);
    draw_page(s, TL_W, height, title, p->subtitle);
    timeline_legend(s, &c, legend_y);
    timeline_rows(s, &c, p, &xt);
    timeline_bars(s, &c, p, clk_min, clk_max);
    timeline_axis(s, &c, p, &xt);
    timeline_colour_bar(s, &c, bar_h, clk_min, clk_max);
    prs_svg_close(s);
    return prs_svg_finish(s, err);
}
