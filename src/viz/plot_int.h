/* Internals shared by the plots of include/perseus/plot.h (plot.c: text, markers, legends,
 * axes, the frontier and savings plots; plot_noise.c; plot_timeline.c). */
#ifndef PRS_PLOT_INT_H
#define PRS_PLOT_INT_H

#include <stddef.h>

#include "perseus/plot.h"

#define FONT_FAMILY "DejaVu Sans, Helvetica, Arial, sans-serif"
#define TITLE_PX 18.0
#define SUBTITLE_PX 12.5
#define AXIS_TITLE_PX 14.0
#define TICK_PX 12.0
#define LEGEND_PX 12.5
#define LEGEND_SAMPLE 30.0 /* a legend entry's line or swatch, pixels */
#define CHART_H 540.0      /* height of the frontier, savings and noise plots */

extern const char *const prs__plot_palette[10]; /* line colours, series i % 10 */
extern const char *const prs__plot_dashes[10];  /* dash patterns, NULL: solid */

typedef struct text_style {
    double size_px;
    const char *anchor; /* start, middle, end */
    const char *fill;
    int bold;
    double rotate_deg; /* about (x, y) */
} text_style;

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

typedef struct legend_entry {
    const char *label;
    const char *color;
    const char *dash; /* line entries: NULL for solid */
    double line_px;   /* 0: no line sample */
    marker_shape marker;
    int filled;
    const char *swatch_fill; /* rectangle swatch (fill or url(#...)); NULL for none */
} legend_entry;

typedef struct chart {
    double left, top, right, bottom; /* plot area in pixels */
    double x0, x1, y0, y1;           /* data shown: the plot area's edges */
    prs_ticks xt, yt;                /* ticks; only those within [x0, x1], [y0, y1] are drawn */
} chart;

/* Data range accumulator. */
typedef struct range {
    double lo, hi;
} range;

/* Width of a label with "_{...}" subscripts (set at 75 %). */
double prs__plot_rich_width(const char *text, double px);
void prs__plot_draw_text(prs_svg *s, double x, double y, const char *text, const text_style *st);
void prs__plot_draw_page(prs_svg *s, double width, double height, const char *title,
                         const char *subtitle);
void prs__plot_draw_marker(prs_svg *s, marker_shape shape, double x, double y, double size,
                           const char *color, int filled);
double prs__plot_legend_width(const legend_entry *e, size_t n);
void prs__plot_draw_legend(prs_svg *s, double x, double y, const legend_entry *e, size_t n);
double prs__plot_map_x(const chart *c, double x);
double prs__plot_map_y(const chart *c, double y);
void prs__plot_draw_axes(prs_svg *s, const chart *c, const char *xlabel, const char *ylabel);
void prs__plot_range_add(range *r, double v);
int prs__plot_chart_axis(double lo, double hi, double pad_lo, double pad_hi, int target, double *a0,
                         double *a1, prs_ticks *t);

#endif
