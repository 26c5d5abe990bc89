/* The reference's exponential cost model fit (docs/planner.md, 'Exponential fit').
 *
 * C(d) = a exp(b d) + c is fitted by nonlinear least squares to the candidates' effective costs
 * against their quantized times, exactly as SciPy's curve_fit does it: MINPACK lmdif
 * (Levenberg-Marquardt, forward-difference Jacobian with epsfcn = machine epsilon,
 * ftol = xtol = 1.49012e-8, gtol = 0, maxfev = 50000, factor 100, automatic scaling), from each
 * of 54 starting points. A start is rejected when lmdif does not converge (SciPy would raise),
 * when the covariance SciPy would report has an infinite entry (singular R, or m <= 3 points),
 * when the mean squared error is not finite, or when a < 0 (not convex). The least-MSE fit wins;
 * ties go to the earlier start. Debian's cminpack is a faithful C translation of MINPACK, so the
 * coefficients match the reference's to about 1e-9 relative. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cminpack.h>

#include "plan_int.h"

typedef struct fit_data {
    const double *x, *y;
} fit_data;

static int residuals(void *p, int m, int n, const double *x, double *fvec, int iflag)
{
    (void)n;
    (void)iflag;
    const fit_data *d = p;
    for (int i = 0; i < m; i++)
        fvec[i] = x[0] * exp(x[1] * d->x[i]) + x[2] - d->y[i];
    return 0;
}

/* SciPy's covariance: inverse of R^T R (R = upper triangle of lmdif's fjac), times the residual
 * variance when m > n, all-infinite otherwise or when R is singular. Returns 1 if any entry
 * would be infinite. */
static int covariance_infinite(const double *fjac, int m, int n, double cost)
{
    if (m <= n) return 1;
    double r[3][3] = {{0}}, inv[3][3] = {{0}};
    for (int j = 0; j < n; j++)
        for (int i = 0; i <= j; i++)
            r[i][j] = fjac[i + j * m];
    for (int i = 0; i < n; i++)
        if (r[i][i] == 0) return 1;
    /* invert the upper-triangular R by back substitution (LAPACK trtri's result) */
    for (int j = n - 1; j >= 0; j--) {
        inv[j][j] = 1.0 / r[j][j];
        for (int i = j - 1; i >= 0; i--) {
            double s = 0;
            for (int k = i + 1; k <= j; k++)
                s += r[i][k] * inv[k][j];
            inv[i][j] = -s / r[i][i];
        }
    }
    double s_sq = cost / (double)(m - n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double v = 0;
            for (int k = 0; k < n; k++)
                v += inv[i][k] * inv[j][k];
            if (isinf(v * s_sq)) return 1;
        }
    return 0;
}

int prs__model_fit_exp(const prs__model_cand *cand, int n, double unit_s, double *a_out,
                       double *b_out, double *c_out)
{
    static const double a_grid[] = {10, 100, 1000};
    static const double k_grid[] = {0.01, 0.02, 0.03, 0.04, 0.05, 0.1};
    static const double c_grid[] = {10, 100, 1000};
    enum { NP = 3 };
    if (n <= 0) return PRS_EFIT;
    double *buf = malloc(sizeof(double) * (size_t)(2 * n + n + n * NP + 4 * n + 3 * NP));
    int ipvt[NP];
    if (!buf) return PRS_ENOMEM;
    double *xs = buf, *ys = xs + n, *fvec = ys + n, *fjac = fvec + n,
           *wa4 = fjac + (ptrdiff_t)n * NP, *qtf = wa4 + n, *wa1 = qtf + NP, *wa2 = wa1 + NP,
           *wa3 = wa2 + NP;
    for (int i = 0; i < n; i++) {
        xs[i] = (double)cand[i].q;
        ys[i] = cand[i].cost_j;
    }
    fit_data data = {xs, ys};
    double best_mse = INFINITY, best[NP] = {0, 0, 0};
    int found = 0;
    const double eps = 2.220446049250313e-16, tol = 1.49012e-08;
    for (size_t ia = 0; ia < 3; ia++)
        for (size_t ib = 0; ib < 6; ib++)
            for (size_t ic = 0; ic < 3; ic++) {
                double x[NP] = {a_grid[ia], -k_grid[ib] * (unit_s / 0.001), c_grid[ic]};
                double diag[NP];
                int nfev = 0;
                int info = lmdif(residuals, &data, n, NP, x, fvec, tol, tol, 0.0, 50000, eps, diag,
                                 1, 100.0, 0, &nfev, fjac, n, ipvt, qtf, wa1, wa2, wa3, wa4);
                if (info < 1 || info > 4) continue;
                double sse = 0;
                for (int i = 0; i < n; i++) {
                    double r = x[0] * exp(x[1] * xs[i]) + x[2] - ys[i];
                    sse += r * r;
                }
                double mse = sse / (double)n;
                if (covariance_infinite(fjac, n, NP, sse)) continue;
                if (!isfinite(mse) || x[0] < 0) continue;
                if (mse < best_mse) {
                    best_mse = mse;
                    memcpy(best, x, sizeof best);
                    found = 1;
                }
            }
    free(buf);
    if (!found) return PRS_EFIT;
    *a_out = best[0];
    *b_out = best[1];
    *c_out = best[2];
    return 0;
}
