/* The pipeline timeline of include/perseus/plot.h (prs_plot_timeline): one row per stage, a bar
 * per computation coloured by its clock, built on the helpers of plot.c (plot_int.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/plot.h"
#include "plot_int.h"

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
        prs__plot_draw_text(s, lx + LEGEND_SAMPLE + 6, legend_y + 15.5, le[i].label, &ls);
        lx += LEGEND_SAMPLE + 6 + prs__plot_rich_width(le[i].label, LEGEND_PX) + 28;
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
        prs__plot_draw_text(s, c->left - 8, y + TL_BAR / 2 + 4, buf, &row_label);
    }
    for (int i = 0; i < xt->count; i++) {
        double v = xt->lo + i * xt->step;
        if (v > p->time_s * (1 + 1e-9)) break;
        double x = prs__plot_map_x(c, v);
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
        double x0 = prs__plot_map_x(c, o->start_s), x1 = prs__plot_map_x(c, o->end_s);
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
        double x0 = prs__plot_map_x(c, o->start_s), x1 = prs__plot_map_x(c, o->end_s);
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
        double x = prs__plot_map_x(c, v);
        prs_svg_line(s, x, c->bottom, x, c->bottom + 5, "stroke", "#333", PRS_SVG_END);
        prs__plot_draw_text(s, x, c->bottom + 19, prs_ticks_label(xt, i, buf, sizeof buf), &tick_x);
    }
    prs_svg_line(s, c->right, c->top - 4, c->right, c->bottom + 5, "stroke", "#333", "stroke-width",
                 "1.5", PRS_SVG_END);
    snprintf(buf, sizeof buf, "%.4g s", p->time_s);
    text_style end = {TICK_PX, "middle", "#111", 1, 0};
    prs__plot_draw_text(s, c->right, c->top - 8, buf, &end);
    text_style at = {AXIS_TITLE_PX, "middle", "#111", 0, 0};
    prs__plot_draw_text(s, (c->left + c->right) / 2, c->bottom + 44,
                        "Time within the iteration (s)", &at);
    text_style yt = {AXIS_TITLE_PX, "middle", "#111", 0, -90};
    prs__plot_draw_text(s, 22, (c->top + c->bottom) / 2, "Pipeline stage", &yt);
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
            prs__plot_draw_text(s, cbx + cbw + 6, y + 4, prs_ticks_label(&ct, i, buf, sizeof buf),
                                &cl);
        }
    } else {
        text_style cl = {TICK_PX - 1, "start", "#333", 0, 0};
        snprintf(buf, sizeof buf, "%d", clk_max);
        prs__plot_draw_text(s, cbx + cbw + 6, cbt + 8, buf, &cl);
    }
    text_style cbt_style = {AXIS_TITLE_PX - 1, "middle", "#111", 0, -90};
    prs__plot_draw_text(s, cbx - 10, (cbt + cbb) / 2, "SM clock (MHz)", &cbt_style);
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
    prs__plot_draw_page(s, TL_W, height, title, p->subtitle);
    timeline_legend(s, &c, legend_y);
    timeline_rows(s, &c, p, &xt);
    timeline_bars(s, &c, p, clk_min, clk_max);
    timeline_axis(s, &c, p, &xt);
    timeline_colour_bar(s, &c, bar_h, clk_min, clk_max);
    prs_svg_close(s);
    return prs_svg_finish(s, err);
}
