/* Reconciling a measured profile with physics before planning (include/perseus/noise.h,
 * docs/noise.md, 'The robust planner').
 *
 * For each computation type (stage, instruction) the rows are sorted by clock and fitted by least
 * squares under shape constraints: time non-increasing and convex in the clock, energy convex in
 * the clock (shapefit.c). Points further from the first fit than PRS_RECONCILE_OUTLIER robust
 * standard deviations (1.4826 times the median absolute relative residual) are replaced by the
 * fit and the fit is redone. Real GPUs follow those shapes only approximately (an A100's energy
 * steps with its voltage), so where a value lies further from the fit than PRS_RECONCILE_KEEP_SD
 * times the noise of one measurement (estimated by the pool, pool.c), the fit keeps the part
 * beyond it: the shape removes noise, not what the GPU does. Finally every clock but the type's
 * fastest gets the time margin margin_sd * (the fit's relative standard error: the residuals'
 * root mean square over the remaining degrees of freedom, times the square root of degrees of
 * freedom over points), and (when margin_sd > 0) is believed no faster than the fastest clock's
 * time plus PRS_RECONCILE_TIE_SD of those errors: where the fit is flat over the top clocks the
 * measurements cannot tell them apart, and the planner must not take one of them for as fast as
 * the fastest because it is cheaper. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/noise.h"
#include "pool.h"
#include "shapefit.h"
#include "type_rows.h"

#define MAD_TO_SD 1.4826
#define FLAT_TOL 1e-9
#define FLAT_SE 2.0

/* Robust relative spread of y around g: 1.4826 median |y/g - 1|. */
static double rel_spread(const double *y, const double *g, int n, double *work)
{
    for (int i = 0; i < n; i++)
        work[i] = fabs(y[i] / g[i] - 1.0);
    return MAD_TO_SD * prs__pool_median(work, n);
}

/* Relative standard error of the fitted values: the residuals' root mean square over the
 * remaining degrees of freedom, times sqrt(dof / n) (each fitted value pools about n / dof
 * measurements). */
static double fit_error(const double *y, const double *g, int n, int dof)
{
    if (dof >= n) return 0;
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (y[i] / g[i] - 1.0) * (y[i] / g[i] - 1.0);
    return sqrt(ss / (n - dof)) * sqrt((double)dof / n);
}

/* Fit, replace outliers by the fit, fit again; returns the relative spread of the residuals and
 * *se the fit's relative standard error. y is overwritten with the cleaned data, g holds the
 * fit. */
static double fit_robust(const double *x, double *y, int n, int decreasing, double *g, double *work,
                         double *se)
{
    int dof = n;
    prs__shape_fit(x, y, n, decreasing, g, &dof);
    double sd = rel_spread(y, g, n, work);
    int replaced = 0;
    for (int i = 0; i < n; i++)
        if (sd > 0 && fabs(y[i] / g[i] - 1.0) > PRS_RECONCILE_OUTLIER * sd) {
            y[i] = g[i];
            replaced = 1;
        }
    if (replaced) {
        prs__shape_fit(x, y, n, decreasing, g, &dof);
        sd = rel_spread(y, g, n, work);
    }
    *se = fit_error(y, g, n, dof);
    return sd;
}

typedef struct type_work {
    prs__type_row *idx; /* rows of the type, by ascending clock */
    double *x, *t, *e, *gt, *ge, *work;
    double *yt, *ye; /* the type's values as they came (pooled or measured) */
} type_work;

/* The clock that keeps the fastest fitted time: the fit is non-increasing, so the highest clock,
 * unless the fit is flat over the top clocks and one of those measured faster than the highest
 * by more than FLAT_SE relative standard errors se (a GPU that throttles at its highest clock
 * measures it slower); then the one measured fastest. */
static int fastest_clock(const double *y, const double *g, int n, double se)
{
    int best = n - 1;
    for (int i = n - 2; i >= 0 && g[i] <= g[n - 1] * (1.0 + FLAT_TOL); i--)
        if (y[i] < y[best]) best = i;
    return y[best] < y[n - 1] * (1.0 - FLAT_SE * se) ? best : n - 1;
}

/* Move the fit g toward the measurement y by the part of their relative difference beyond
 * PRS_RECONCILE_KEEP_SD relative noises (noise < 0: unknown, g stays): what the noise cannot
 * explain is the GPU's, not the measurement's. */
static double keep_beyond_noise(double y, double g, double noise)
{
    if (noise < 0 || !(g > 0) || !(y > 0)) return g;
    double d = y / g - 1.0, excess = fabs(d) - PRS_RECONCILE_KEEP_SD * noise;
    return excess > 0 ? g * (1.0 + (d > 0 ? excess : -excess)) : g;
}

/* Reconcile the n rows of one type, ty[0..n) by ascending clock, into out[]; returns the relative
 * standard error of its fitted times. se_pool >= 0: the type's times were pooled (pool.c), with
 * that relative standard error, which then sets the margin; e_pooled: its energies were.
 * noise[0], noise[1]: the relative noise of one measured time and energy of the type's
 * instruction (< 0: unknown). The shape fit keeps what the values show beyond that noise: the
 * pooled values (the pool has replaced a single type's outliers) or, for a type not pooled, its
 * measurements with the shape fit's outliers replaced. */
static double reconcile_type(const prs_profile_row *rows, const double noise[2],
                             const prs__type_row *ty, type_work *w, int n, double margin_sd,
                             double se_pool, int e_pooled, prs_profile_row *out)
{
    for (int i = 0; i < n; i++) {
        const prs_profile_row *r = &rows[ty[i].row];
        w->x[i] = r->freq_mhz;
        w->t[i] = w->yt[i] = r->time_s;
        w->e[i] = w->ye[i] = r->energy_j;
    }
    double se_t, se_e;
    fit_robust(w->x, w->t, n, 1, w->gt, w->work, &se_t);
    fit_robust(w->x, w->e, n, 0, w->ge, w->work, &se_e);
    const double *kt = se_pool >= 0 ? w->yt : w->t, *ke = e_pooled ? w->ye : w->e;
    for (int i = 0; i < n; i++) {
        w->gt[i] = keep_beyond_noise(kt[i], w->gt[i], noise[0]);
        w->ge[i] = keep_beyond_noise(ke[i], w->ge[i], noise[1]);
    }
    if (se_pool >= 0) se_t = se_pool;
    int fastest = fastest_clock(w->t, w->gt, n, se_t);
    double floor_t = (w->gt[fastest] > 0 ? w->gt[fastest] : rows[ty[fastest].row].time_s) *
                     (1.0 + (margin_sd > 0 ? PRS_RECONCILE_TIE_SD : 0) * se_t);
    for (int i = 0; i < n; i++) {
        size_t r = ty[i].row;
        prs_profile_row *o = &out[r];
        double t = w->gt[i] > 0 ? w->gt[i] : rows[r].time_s;
        if (i != fastest) t *= 1.0 + margin_sd * se_t;
        if (i != fastest && t < floor_t) t = floor_t;
        o->time_s = t;
        o->energy_j = w->ge[i] > 0 ? w->ge[i] : rows[r].energy_j;
    }
    return se_t;
}

static void work_free(type_work *w)
{
    free(w->idx);
    free(w->x);
    free(w->t);
    free(w->e);
    free(w->gt);
    free(w->ge);
    free(w->work);
    free(w->yt);
    free(w->ye);
}

static int work_alloc(type_work *w, size_t n)
{
    memset(w, 0, sizeof *w);
    w->idx = malloc(sizeof *w->idx * n);
    w->x = malloc(sizeof *w->x * n);
    w->t = malloc(sizeof *w->t * n);
    w->e = malloc(sizeof *w->e * n);
    w->gt = malloc(sizeof *w->gt * n);
    w->ge = malloc(sizeof *w->ge * n);
    w->work = malloc(sizeof *w->work * n);
    w->yt = malloc(sizeof *w->yt * n);
    w->ye = malloc(sizeof *w->ye * n);
    if (w->idx && w->x && w->t && w->e && w->gt && w->ge && w->work && w->yt && w->ye) return 0;
    work_free(w);
    return -1;
}

/* One computation type: its rows are idx[start .. start + n). */
typedef struct type_run {
    size_t start;
    int n;
    double se_pool; /* < 0: not pooled */
    double se_fit;  /* relative standard error of the fitted times; < 0: not fitted */
    int e_pooled;   /* its energies were pooled */
} type_run;

static int same_clocks(const prs__type_row *a, const prs__type_row *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].freq_mhz != b[i].freq_mhz) return 0;
    return 1;
}

/* Pool the types of one instruction that share the first such type's clocks (pool.c): their
 * pooled times and energies go into src, their time standard error into the runs. 0, or -1
 * when out of memory. */
static int pool_instr(const prs__type_row *idx, type_run *runs, int nruns, int instr,
                      prs_profile_row *src, double noise[2])
{
    int ref = -1, ng = 0;
    for (int r = 0; r < nruns; r++) {
        const prs__type_row *c = idx + runs[r].start;
        if (c->instr != instr || runs[r].n < 3 || runs[r].n > PRS_RECONCILE_MAX_CLOCKS) continue;
        if (ref < 0) ref = r;
        ng += runs[r].n == runs[ref].n && same_clocks(c, idx + runs[ref].start, runs[r].n);
    }
    if (ng < 2) return 0;
    /* group: filled below, one entry per counted type (zeroed: the analyzer cannot tell) */
    int nc = runs[ref].n, *group = calloc((size_t)ng, sizeof *group),
        *mt = malloc(sizeof *mt * (size_t)ng), *me = malloc(sizeof *me * (size_t)ng);
    size_t cells = (size_t)ng * (size_t)nc;
    double *v = malloc(sizeof *v * cells * 2), *fit = malloc(sizeof *fit * cells * 2);
    int rc = group && mt && me && v && fit ? 0 : -1;
    for (int r = 0, g = 0; !rc && r < nruns; r++) {
        const prs__type_row *c = idx + runs[r].start;
        if (c->instr != instr || runs[r].n != nc || !same_clocks(c, idx + runs[ref].start, nc))
            continue;
        group[g] = r;
        for (int j = 0; j < nc; j++) {
            v[(size_t)g * (size_t)nc + (size_t)j] = src[c[j].row].time_s;
            v[cells + (size_t)g * (size_t)nc + (size_t)j] = src[c[j].row].energy_j;
        }
        g++;
    }
    double se = rc ? -1 : prs__pool_fit(v, ng, nc, fit, mt, &noise[0]);
    if (!rc && (se < 0 || prs__pool_fit(v + cells, ng, nc, fit + cells, me, &noise[1]) < 0))
        rc = -1;
    for (int g = 0; !rc && g < ng; g++) {
        const prs__type_row *c = idx + runs[group[g]].start;
        if (mt[g]) runs[group[g]].se_pool = se;
        runs[group[g]].e_pooled = me[g];
        for (int j = 0; j < nc; j++) {
            src[c[j].row].time_s = fit[(size_t)g * (size_t)nc + (size_t)j];
            src[c[j].row].energy_j = fit[cells + (size_t)g * (size_t)nc + (size_t)j];
        }
    }
    free(group);
    free(mt);
    free(me);
    free(v);
    free(fit);
    return rc;
}

/* Reconcile every type of rows into out (a copy of rows on entry): rows sorted by type and
 * clock, types sharing a shape pooled, then each type fitted. Returns the median relative
 * standard error of the fitted types' times; -1 when out of memory. */
static double reconcile_all(const prs_profile_row *rows, size_t n, double margin_sd, type_work *w,
                            prs_profile_row *out)
{
    prs__type_rows_sort(rows, n, w->idx);
    type_run *runs = malloc(sizeof *runs * (n ? n : 1));
    prs_profile_row *src = malloc(sizeof *src * (n ? n : 1));
    if (!runs || !src) {
        free(runs);
        free(src);
        return -1;
    }
    int nruns = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1;
             j < n && w->idx[j].stage == w->idx[i].stage && w->idx[j].instr == w->idx[i].instr; j++)
            ;
        type_run r = {i, j - i > INT32_MAX ? INT32_MAX : (int)(j - i), -1.0, -1.0, 0};
        runs[nruns++] = r;
    }
    if (n) memcpy(src, rows, sizeof *src * n);
    int fitted = 0;
    double se = 0;
    double noise[2][2] = {{-1, -1}, {-1, -1}}; /* per instruction: time, energy */
    if (pool_instr(w->idx, runs, nruns, PRS_FORWARD, src, noise[PRS_FORWARD]) ||
        pool_instr(w->idx, runs, nruns, PRS_BACKWARD, src, noise[PRS_BACKWARD]))
        se = -1;
    for (int r = 0; r < nruns && se >= 0; r++)
        if (runs[r].n >= 3 && runs[r].n <= PRS_RECONCILE_MAX_CLOCKS)
            runs[r].se_fit =
                reconcile_type(src, noise[w->idx[runs[r].start].instr], w->idx + runs[r].start, w,
                               runs[r].n, margin_sd, runs[r].se_pool, runs[r].e_pooled, out);
    for (int r = 0; r < nruns && se >= 0; r++) /* the median over fitted types */
        if (runs[r].se_fit >= 0) w->work[fitted++] = runs[r].se_fit;
    if (se >= 0 && fitted) se = prs__pool_median(w->work, fitted);
    free(runs);
    free(src);
    return se;
}

int prs_profile_reconcile(const prs_profile *measured, double margin_sd, prs_profile **out,
                          double *se_pct, prs_error *err)
{
    if (!out) return prs_error_set(err, PRS_EINVAL, "reconcile: NULL output");
    *out = NULL;
    if (!measured) return prs_error_set(err, PRS_EINVAL, "reconcile: NULL profile");
    if (!isfinite(margin_sd) || margin_sd < 0 || margin_sd > 100)
        return prs_error_set(err, PRS_EINVAL, "reconcile: margin must be in [0, 100] deviations");
    size_t n = prs_profile_nrows(measured);
    const prs_profile_row *rows = prs_profile_rows(measured);
    type_work w;
    prs_profile_row *fixed = malloc(sizeof *fixed * (n ? n : 1));
    prs_profile *p = prs_profile_new();
    if (!fixed || !p || work_alloc(&w, n ? n : 1)) {
        free(fixed);
        prs_profile_free(p);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    if (n) memcpy(fixed, rows, sizeof *fixed * n);
    double se = reconcile_all(rows, n, margin_sd, &w, fixed);
    work_free(&w);
    int rc = se < 0 ? PRS_ENOMEM : 0;
    if (rc) prs_error_set(err, rc, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        fixed[i].line = 0;
        rc = prs_profile_add(p, &fixed[i], err);
    }
    free(fixed);
    if (rc) {
        prs_profile_free(p);
        return rc;
    }
    if (se_pct) *se_pct = 100.0 * se;
    *out = p;
    return 0;
}
