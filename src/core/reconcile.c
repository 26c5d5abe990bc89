/* Reconciling a measured profile with physics before planning (include/perseus/noise.h,
 * docs/noise.md, 'The robust planner').
 *
 * For each computation type (stage, instruction) the rows are sorted by clock and fitted by least
 * squares under shape constraints: time non-increasing and convex in the clock, energy convex in
 * the clock (shapefit.c). Points further from the first fit than PRS_RECONCILE_OUTLIER
 * robust standard deviations (1.4826 times the median absolute relative residual) are replaced by
 * the fit and the fit is redone. Finally every clock below the type's highest gets the time
 * margin margin_sd * (the fit's relative standard error: the residuals' root mean square over the
 * remaining degrees of freedom, times the square root of degrees of freedom over points). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/noise.h"
#include "shapefit.h"

#define MAD_TO_SD 1.4826

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Robust relative spread of y around g: 1.4826 median |y/g - 1|. */
static double rel_spread(const double *y, const double *g, int n, double *work)
{
    for (int i = 0; i < n; i++)
        work[i] = fabs(y[i] / g[i] - 1.0);
    qsort(work, (size_t)n, sizeof *work, cmp_double);
    double med = n % 2 ? work[n / 2] : 0.5 * (work[n / 2 - 1] + work[n / 2]);
    return MAD_TO_SD * med;
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

typedef struct clock_row {
    int stage, instr, freq_mhz;
    size_t row;
} clock_row;

typedef struct type_work {
    clock_row *idx; /* rows of the type, by ascending clock */
    double *x, *t, *e, *gt, *ge, *work;
} type_work;

/* By type (stage, instruction), then ascending clock. */
static int cmp_row_clock(const void *a, const void *b)
{
    const clock_row *x = a, *y = b;
    if (x->stage != y->stage) return (x->stage > y->stage) - (x->stage < y->stage);
    if (x->instr != y->instr) return (x->instr > y->instr) - (x->instr < y->instr);
    return (x->freq_mhz > y->freq_mhz) - (x->freq_mhz < y->freq_mhz);
}

/* Reconcile the n rows of one type, ty[0..n) by ascending clock, into out[]; returns its
 * relative time spread. */
static double reconcile_type(const prs_profile_row *rows, const clock_row *ty, type_work *w, int n,
                             double margin_sd, prs_profile_row *out)
{
    for (int i = 0; i < n; i++) {
        const prs_profile_row *r = &rows[ty[i].row];
        w->x[i] = r->freq_mhz;
        w->t[i] = r->time_s;
        w->e[i] = r->energy_j;
    }
    double se_t, se_e;
    double sd_t = fit_robust(w->x, w->t, n, 1, w->gt, w->work, &se_t);
    fit_robust(w->x, w->e, n, 0, w->ge, w->work, &se_e);
    for (int i = 0; i < n; i++) {
        size_t r = ty[i].row;
        prs_profile_row *o = &out[r];
        double t = w->gt[i] > 0 ? w->gt[i] : rows[r].time_s;
        if (i < n - 1) t *= 1.0 + margin_sd * se_t;
        o->time_s = t;
        o->energy_j = w->ge[i] > 0 ? w->ge[i] : rows[r].energy_j;
    }
    return sd_t;
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
    if (w->idx && w->x && w->t && w->e && w->gt && w->ge && w->work) return 0;
    work_free(w);
    return -1;
}

/* Reconcile every type of rows into out (a copy of rows on entry): rows sorted by type and
 * clock, then each run of one type fitted. */
static double reconcile_all(const prs_profile_row *rows, size_t n, double margin_sd, type_work *w,
                            prs_profile_row *out)
{
    for (size_t i = 0; i < n; i++) {
        clock_row c = {rows[i].stage, (int)rows[i].instr, rows[i].freq_mhz, i};
        w->idx[i] = c;
    }
    qsort(w->idx, n, sizeof *w->idx, cmp_row_clock);
    double spread = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1;
             j < n && w->idx[j].stage == w->idx[i].stage && w->idx[j].instr == w->idx[i].instr; j++)
            ;
        if (j - i >= 3 && j - i <= PRS_RECONCILE_MAX_CLOCKS)
            spread =
                fmax(spread, reconcile_type(rows, w->idx + i, w, (int)(j - i), margin_sd, out));
    }
    return spread;
}

int prs_profile_reconcile(const prs_profile *measured, double margin_sd, prs_profile **out,
                          double *spread_pct, prs_error *err)
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
    double spread = reconcile_all(rows, n, margin_sd, &w, fixed);
    work_free(&w);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        fixed[i].line = 0;
        rc = prs_profile_add(p, &fixed[i], err);
    }
    free(fixed);
    if (rc) {
        prs_profile_free(p);
        return rc;
    }
    if (spread_pct) *spread_pct = 100.0 * spread;
    *out = p;
    return 0;
}

int prs_plan_robust(const prs_profile *measured, const prs_plan_opts *opts, prs_frontier **out,
                    prs_error *err)
{
    prs_profile *fit = NULL;
    int rc = prs_profile_reconcile(measured, PRS_RECONCILE_MARGIN_SD, &fit, NULL, err);
    if (!rc) rc = prs_plan(fit, opts, out, err);
    prs_profile_free(fit);
    return rc;
}
