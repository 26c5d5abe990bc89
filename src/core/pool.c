/* Pooling types that share a shape (pool.h). Times (and energies) of different pipeline stages
 * measured on one GPU often follow one curve over the clocks up to a factor: the same kernels,
 * more or fewer of them. Fitting log v = a_type + h_clock, a two-way additive model, estimates
 * each type's factor from all of its clocks and the shared curve from all pooled types, so each
 * fitted value rests on far more measurements than the type's own fit would. With every type
 * over the same clocks the least-squares fit is closed-form: row mean + column mean - grand mean.
 * Types that do not follow the shared curve are detected from their residuals and left out.
 * Types whose scales the noise cannot tell apart get one scale (merge_scales): left to their own
 * estimates, identical stages would look a fraction of a unit apart and the planner would plan
 * on slack that is not there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

#define MAD_TO_SD 1.4826
#define OUTLIER_SD 4.0
#define BAND_SE 3.0
#define NBANDS 4
#define MERGE_SE 3.0
/* The least noise the misfit test assumes: exact data (a residual spread of rounding
 * errors, some 1e-16) must not make every type a misfit by the luck of its rounding. */
#define SD_FLOOR 1e-9

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double prs__pool_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Fit the members' rows of lv (logs) into fit; returns the residuals' robust deviation. */
static double additive_fit(const double *lv, int nt, int nc, const int *member, double *fit,
                           double *work)
{
    double *col = work + (size_t)nt * (size_t)nc;
    double grand = 0;
    int nm = 0;
    memset(col, 0, sizeof *col * (size_t)nc);
    for (int i = 0; i < nt; i++) {
        if (!member[i]) continue;
        nm++;
        for (int j = 0; j < nc; j++)
            col[j] += lv[(size_t)i * (size_t)nc + (size_t)j];
    }
    for (int j = 0; j < nc; j++) {
        col[j] /= nm;
        grand += col[j] / nc;
    }
    int k = 0;
    for (int i = 0; i < nt; i++) {
        if (!member[i]) continue;
        double row = 0;
        for (int j = 0; j < nc; j++)
            row += lv[(size_t)i * (size_t)nc + (size_t)j] / nc;
        for (int j = 0; j < nc; j++) {
            size_t at = (size_t)i * (size_t)nc + (size_t)j;
            fit[at] = row + col[j] - grand;
            work[k++] = fabs(lv[at] - fit[at]);
        }
    }
    return MAD_TO_SD * prs__pool_median(work, k);
}

/* Leave out members whose mean residual over a band of clocks is beyond BAND_SE standard
 * errors; returns how many left. */
static int drop_misfits(const double *lv, const double *fit, int nt, int nc, double sd, int *member)
{
    int dropped = 0, band = nc / NBANDS > 0 ? nc / NBANDS : 1;
    for (int i = 0; i < nt; i++) {
        if (!member[i]) continue;
        for (int b0 = 0; b0 < nc && member[i]; b0 += band) {
            int b1 = b0 + band < nc ? b0 + band : nc;
            double s = 0;
            for (int j = b0; j < b1; j++)
                s += lv[(size_t)i * (size_t)nc + (size_t)j] -
                     fit[(size_t)i * (size_t)nc + (size_t)j];
            if (fabs(s / (b1 - b0)) > BAND_SE * sd / sqrt((double)(b1 - b0))) {
                member[i] = 0;
                dropped++;
            }
        }
    }
    return dropped;
}

/* Members whose scales a_type differ by less than the noise can tell apart get one scale: sorted
 * by scale, a run of members stays one group while its spread is within MERGE_SE standard errors
 * of a difference of two scales, sd sqrt(2 / nc); each group's fitted rows then use the group's
 * mean scale. */
static void merge_scales(int nt, int nc, double sd, const int *member, double *fit, double *work)
{
    double *row = work;
    int *order = (int *)(work + nt), n = 0;
    for (int i = 0; i < nt; i++) {
        row[i] = 0;
        if (!member[i]) continue;
        for (int j = 0; j < nc; j++)
            row[i] += fit[(size_t)i * (size_t)nc + (size_t)j] / nc;
        order[n++] = i;
    }
    for (int a = 1; a < n; a++) /* insertion sort by scale: few types */
        for (int b = a; b > 0 && row[order[b - 1]] > row[order[b]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    double tol = MERGE_SE * sd * sqrt(2.0 / nc);
    for (int g0 = 0, g1; g0 < n; g0 = g1) {
        double mean = 0;
        for (g1 = g0; g1 < n && row[order[g1]] - row[order[g0]] <= tol; g1++)
            mean += row[order[g1]];
        mean /= g1 - g0;
        for (int g = g0; g < g1; g++)
            for (int j = 0; j < nc; j++)
                fit[(size_t)order[g] * (size_t)nc + (size_t)j] += mean - row[order[g]];
    }
}

static int members(const int *member, int nt)
{
    int m = 0;
    for (int i = 0; i < nt; i++)
        m += member[i];
    return m;
}

double prs__pool_fit(const double *v, int nt, int nc, double *out, int *member, double *noise)
{
    *noise = -1;
    size_t cells = (size_t)nt * (size_t)nc;
    memcpy(out, v, sizeof *out * cells);
    for (int i = 0; i < nt; i++)
        member[i] = 0;
    if (nt < 2 || nc < 3) return 0;
    double *lv = calloc(cells, sizeof *lv), *fit = calloc(cells, sizeof *fit);
    double *work = calloc(cells + (size_t)nc, sizeof *work);
    if (!lv || !fit || !work) {
        free(lv);
        free(fit);
        free(work);
        return -1;
    }
    for (size_t c = 0; c < cells; c++)
        lv[c] = log(v[c]);
    for (int i = 0; i < nt; i++)
        member[i] = 1;
    double sd = additive_fit(lv, nt, nc, member, fit, work);
    *noise = sd;
    for (size_t c = 0; c < cells; c++) /* outliers replaced by the fit */
        if (fabs(lv[c] - fit[c]) > OUTLIER_SD * sd) lv[c] = fit[c];
    sd = additive_fit(lv, nt, nc, member, fit, work);
    if (drop_misfits(lv, fit, nt, nc, fmax(sd, SD_FLOOR), member) && members(member, nt) >= 2)
        sd = additive_fit(lv, nt, nc, member, fit, work);
    int m = members(member, nt);
    if (m >= 2) merge_scales(nt, nc, sd, member, fit, work);
    double se = 0;
    if (m >= 2) {
        for (size_t c = 0; c < cells; c++)
            if (member[c / (size_t)nc]) out[c] = exp(fit[c]);
        se = sd * sqrt(1.0 / nc + 1.0 / m);
        *noise = sd; /* the members' residuals: noise, without the misfits' shapes */
    } else {
        for (int i = 0; i < nt; i++)
            member[i] = 0;
    }
    free(lv);
    free(fit);
    free(work);
    return se;
}
