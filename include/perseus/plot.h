/* Plots as standalone SVG 1.1 documents: the time-energy frontier with baselines, a plan's
 * pipeline timeline, and energy savings versus straggler slowdown (docs/plots.md).
 *
 * Three layers, each usable on its own:
 *   - prs_svg: a small streaming SVG/XML writer that escapes every text and attribute value;
 *   - scales: "nice" axis ticks and a sequential colormap (viridis);
 *   - plots: each takes plain data (arrays of numbers, labelled points and series, timeline
 *     operations), never a planner or emulator handle, so any caller can draw its own numbers.
 * Nothing here prints to stderr or exits; output goes to a caller-owned FILE *, which is never
 * closed by these functions. */
#ifndef PERSEUS_PLOT_H
#define PERSEUS_PLOT_H

#include "perseus/export.h"

#include <stddef.h>
#include <stdio.h>
#include "perseus/error.h"
#include "perseus/planner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- SVG writer ------------------------------------------------------------------------- */

typedef struct prs_svg prs_svg;

/* Ends a list of name/value attribute pairs (a null pointer of the arguments' type: a bare NULL
 * may be an int in a variadic call). */
#define PRS_SVG_END ((const char *)0)

/* Start a document of width x height pixels on out: XML declaration, the root <svg> element
 * (SVG 1.1, xmlns, viewBox) and, if title is non-NULL, its <title>. NULL if out of memory.
 * Every writer call below is a no-op once the writer has seen a misuse or a write error;
 * prs_svg_finish reports it. */
PRS_API prs_svg *prs_svg_new(FILE *out, double width_px, double height_px, const char *title);

/* Begin a start tag "<name" (name: a plain XML name, at most 31 characters). Attributes follow
 * with prs_svg_attr*; then prs_svg_open (the element takes children or text, later closed
 * with prs_svg_close) or prs_svg_end (an empty element, "/>"). Elements nest at most 16 deep. */
PRS_API void prs_svg_begin(prs_svg *s, const char *name);
/* Attribute with an escaped value (&, <, >, " and ' become entity references). */
PRS_API void prs_svg_attr(prs_svg *s, const char *name, const char *value);
/* Attribute with a printf-formatted value, escaped as prs_svg_attr does. */
PRS_API void prs_svg_attrf(prs_svg *s, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Numeric attribute, written with at most 2 decimals and no trailing zeros ("12.5", "3"). */
PRS_API void prs_svg_attr_num(prs_svg *s, const char *name, double value);
/* Attributes as name/value string pairs, terminated by PRS_SVG_END. */
PRS_API void prs_svg_attrs(prs_svg *s, ...) __attribute__((sentinel));
PRS_API void prs_svg_open(prs_svg *s);
PRS_API void prs_svg_end(prs_svg *s);
/* Character data (escaped) inside the innermost open element. */
PRS_API void prs_svg_text(prs_svg *s, const char *text);
/* Close the innermost open element. */
PRS_API void prs_svg_close(prs_svg *s);

/* Shapes: one empty element each, extra attributes as name/value string pairs ending in
 * PRS_SVG_END. */
PRS_API void prs_svg_rect(prs_svg *s, double x, double y, double w, double h, ...)
    __attribute__((sentinel));
PRS_API void prs_svg_line(prs_svg *s, double x1, double y1, double x2, double y2, ...)
    __attribute__((sentinel));
/* <text x y ...>text</text>; extra attributes as pairs ending in PRS_SVG_END. */
PRS_API void prs_svg_label(prs_svg *s, double x, double y, const char *text, ...)
    __attribute__((sentinel));

/* Close every open element and the root, flush, and free s. 0 on success; PRS_EINVAL if the
 * calls did not form a document (e.g. text outside an open element, too deep nesting, a start
 * tag never ended), PRS_EIO if writing failed. s is freed either way; NULL gives PRS_ENOMEM. */
PRS_API int prs_svg_finish(prs_svg *s, prs_error *err);

/* Escape src for XML text or attribute values into dst (n bytes, always NUL-terminated when
 * n > 0): & < > " ' become entity references, control characters XML 1.0 forbids '?', and each
 * byte that is not part of a well-formed UTF-8 sequence (or U+FFFE, U+FFFF) U+FFFD, so the
 * document stays well-formed UTF-8 whatever src holds. Every text and attribute value the
 * writer takes is escaped this way. Returns the length of the full escaped text, as snprintf
 * does. */
PRS_API size_t prs_svg_escape(char *dst, size_t n, const char *src);

/* Approximate width in pixels of text set in a sans-serif font of font_px (for layout only). */
PRS_API double prs_svg_text_width(const char *text, double font_px);

/* ---- Scales ----------------------------------------------------------------------------- */

/* Axis ticks: lo + i * step for i = 0 .. count - 1, where step is 1, 2, 2.5 or 5 times a power
 * of ten, lo <= data_lo and hi = lo + (count - 1) * step >= data_hi (the axis spans whole
 * steps), and decimals is the number of decimals that tells every tick apart. */
typedef struct prs_ticks {
    double lo, hi, step;
    int count;
    int decimals;
} prs_ticks;

/* Ticks for data in [data_lo, data_hi]: of the nice steps, the one giving the count closest
 * to target (>= 2; ties go to the larger step). A zero-width range is widened around the
 * value. PRS_EINVAL for non-finite bounds, data_lo > data_hi or target < 2. */
PRS_API int prs_nice_ticks(double data_lo, double data_hi, int target, prs_ticks *out);
/* Text of tick i ("2.25", "4600", never "-0"); returns buf. */
PRS_API char *prs_ticks_label(const prs_ticks *t, int i, char *buf, size_t n);

typedef struct prs_rgb {
    unsigned char r, g, b;
} prs_rgb;

/* Viridis, a perceptually uniform sequential colormap: t in [0, 1] (clamped; NaN gives 0)
 * from dark purple (0) through teal to yellow (1), interpolated linearly between nine anchors
 * of the matplotlib table. Lightness increases monotonically with t. */
PRS_API prs_rgb prs_colormap_viridis(double t);

/* ---- Plots ------------------------------------------------------------------------------ */

/* n points (x[i], y[i]) with a legend label. */
typedef struct prs_plot_series {
    const char *label;
    const double *x, *y;
    size_t n;
} prs_plot_series;

/* One labelled point (a baseline on the frontier plot). */
typedef struct prs_plot_point {
    const char *label;
    double x, y;
} prs_plot_point;

/* Frontier plot: iteration time (s) on x, iteration energy (J) on y. */
typedef struct prs_frontier_plot {
    const char *title;               /* NULL: "Iteration time-energy frontier" */
    const char *subtitle;            /* optional second line (the pipeline, say); NULL for none */
    prs_plot_series predicted;       /* planned time and model-predicted energy: a line */
    prs_plot_series evaluated;       /* evaluated time and energy of the same plans: markers */
    const prs_plot_point *baselines; /* up to 6, drawn as distinct labelled markers */
    size_t nbaselines;
    const prs_plot_series *curves; /* up to 4 more curves to compare with (the uniform-clock */
    size_t ncurves;                /* sweep, say): dashed lines with small markers */
    double tmin_s;  /* vertical marker "T_min" (fastest plan); <= 0 or NaN for none */
    double tstar_s; /* vertical marker "T*" (least-energy plan); <= 0 or NaN for none */
} prs_frontier_plot;

/* Draw a frontier plot on out. Series of any length (0 allowed) are thinned to points at
 * least a pixel apart. PRS_EINVAL if nothing finite is to be drawn or an array is NULL with
 * n > 0; PRS_EIO on a write error. */
PRS_API int prs_plot_frontier(FILE *out, const prs_frontier_plot *p, prs_error *err);

/* Savings plot: straggler slowdown T'/T_min on x, saving (%) on y, one line per method. */
typedef struct prs_savings_plot {
    const char *title;             /* NULL: "Energy savings vs straggler slowdown" */
    const char *subtitle;          /* optional second line; NULL for none */
    const char *y_label;           /* NULL: "Energy saving (%)" */
    const prs_plot_series *series; /* series[0] (Perseus) is drawn on top, thicker; up to 10 */
    size_t nseries;
    const char *x_label; /* NULL: "Straggler slowdown T'/T_min" (any line plot can set its own) */
} prs_savings_plot;

PRS_API int prs_plot_savings(FILE *out, const prs_savings_plot *p, prs_error *err);

/* Timeline plot: one row per GPU, each computation a rectangle from start to end, coloured
 * by its clock on the viridis scale, backward computations hatched, "F3"/"B3" (microbatch)
 * written inside when the rectangle is wide enough; idle time shows as grey background. */
typedef struct prs_timeline_plot {
    const char *title;          /* NULL: "Pipeline timeline" */
    const char *subtitle;       /* optional second line; NULL for none */
    const prs_timeline_op *ops; /* from prs_plan_timeline */
    size_t nops;
    int stages;        /* rows; every op's stage must be in 0 .. stages - 1 */
    double time_s;     /* iteration time: the end of the x axis */
    int clock_min_mhz; /* colour scale; both 0: the range of the ops' clocks */
    int clock_max_mhz;
} prs_timeline_plot;

PRS_API int prs_plot_timeline(FILE *out, const prs_timeline_plot *p, prs_error *err);

/* Noise plot (perseus noise, docs/noise.md): time overshoot (left) and energy regret (right),
 * in percent, versus jitter in percent; per cost model and planner (0: baseline, 1: robust) the
 * median over seeds as a line and the range over seeds as a whisker. */
typedef struct prs_noise_plot_level {
    double jitter_pct;
    const char *cost_model; /* levels with the same name form one series per planner */
    /* Per planner, the first of nseeds values spaced stride doubles apart. */
    const double *overshoot_pct[2];
    const double *regret_pct[2];
} prs_noise_plot_level;

typedef struct prs_noise_plot {
    const char *title;    /* NULL: "What profile noise costs" */
    const char *subtitle; /* optional second line; NULL for none */
    const prs_noise_plot_level *levels;
    size_t nlevels; /* at most 128, of at most 4 cost models */
    size_t nseeds;  /* >= 1 */
    size_t stride;  /* >= 1 */
} prs_noise_plot;

PRS_API int prs_plot_noise(FILE *out, const prs_noise_plot *p, prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
