/* Shape-constrained least squares (shapefit.h). A convex function on the points x_0 < ... <
 * x_{n-1} is exactly a + b (x_{n-1} - x) + sum_j c_j (x_j - x)_+ with every c_j >= 0 (the slope
 * falls by c_j to the left of each interior point x_j); it is also non-increasing exactly when
 * b >= 0. So the fit is a non-negative least-squares problem in that hinge basis, with a (and b
 * when the function may rise) free. It is solved by the active-set method of Lawson and Hanson:
 * grow the set of free coefficients by the one whose gradient is largest, solve the unconstrained
 * problem on the set (normal equations, Cholesky), and step back to the boundary whenever a
 * coefficient would turn negative. Columns are scaled to x in [0, 1]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shapefit.h"

typedef struct nnls {
    int n, m;      /* points, coefficients */
    int nfree;     /* coefficients 0 .. nfree-1 are never constrained */
    double *a;     /* n x m basis, row-major */
    double *gram;  /* m x m: A^T A */
    double *aty;   /* A^T y */
    double *z, *s; /* current and trial coefficients */
    double *chol;  /* factor of the passive block */
    int *passive;  /* 1 when coefficient j is in the passive (free) set */
    int *idx;      /* passive coefficients, in order */
} nnls;

static void basis(nnls *q, const double *x, int decreasing)
{
    int n = q->n;
    double span = x[n - 1] - x[0];
    q->nfree = decreasing ? 1 : 2;
    for (int i = 0; i < n; i++) {
        double *row = q->a + (size_t)i * (size_t)q->m;
        row[0] = 1.0;
        row[1] = (x[n - 1] - x[i]) / span;
        for (int j = 1; j + 1 < n; j++) /* knot at x_j: column j + 1 */
            row[j + 1] = x[j] > x[i] ? (x[j] - x[i]) / span : 0.0;
    }
}

static void normal_equations(nnls *q, const double *y)
{
    int n = q->n, m = q->m;
    for (int j = 0; j < m; j++) {
        double t = 0;
        for (int i = 0; i < n; i++)
            t += q->a[(size_t)i * (size_t)m + (size_t)j] * y[i];
        q->aty[j] = t;
        for (int k = 0; k <= j; k++) {
            double v = 0;
            for (int i = 0; i < n; i++)
                v += q->a[(size_t)i * (size_t)m + (size_t)j] *
                     q->a[(size_t)i * (size_t)m + (size_t)k];
            q->gram[(size_t)j * (size_t)m + (size_t)k] =
                q->gram[(size_t)k * (size_t)m + (size_t)j] = v;
        }
    }
}

/* s = the unconstrained least-squares coefficients on the passive set, 0 elsewhere. A tiny
 * ridge keeps nearly collinear hinges factorable. */
static void solve_passive(nnls *q)
{
    int m = q->m, k = 0;
    for (int j = 0; j < m; j++)
        if (q->passive[j]) q->idx[k++] = j;
    double *l = q->chol;
    for (int r = 0; r < k; r++)
        for (int c = 0; c <= r; c++) {
            double v = q->gram[(size_t)q->idx[r] * (size_t)m + (size_t)q->idx[c]];
            if (r == c) v *= 1.0 + 1e-12;
            for (int t = 0; t < c; t++)
                v -= l[(size_t)r * (size_t)m + (size_t)t] * l[(size_t)c * (size_t)m + (size_t)t];
            l[(size_t)r * (size_t)m + (size_t)c] =
                r == c ? sqrt(v > 1e-300 ? v : 1e-300) : v / l[(size_t)c * (size_t)m + (size_t)c];
        }
    double *w = q->s; /* forward then back substitution, in s's storage by passive order */
    double tmp[PRS__SHAPE_MAX_POINTS];
    for (int r = 0; r < k; r++) {
        double v = q->aty[q->idx[r]];
        for (int t = 0; t < r; t++)
            v -= l[(size_t)r * (size_t)m + (size_t)t] * tmp[t];
        tmp[r] = v / l[(size_t)r * (size_t)m + (size_t)r];
    }
    for (int r = k - 1; r >= 0; r--) {
        double v = tmp[r];
        for (int t = r + 1; t < k; t++)
            v -= l[(size_t)t * (size_t)m + (size_t)r] * tmp[t];
        tmp[r] = v / l[(size_t)r * (size_t)m + (size_t)r];
    }
    memset(w, 0, sizeof *w * (size_t)m);
    for (int r = 0; r < k; r++)
        w[q->idx[r]] = tmp[r];
}

/* The constrained coefficient with the largest gradient of the residual, or -1 at optimum. */
static int entering(const nnls *q, double tol)
{
    int best = -1;
    double bw = tol;
    for (int j = q->nfree; j < q->m; j++) {
        if (q->passive[j]) continue;
        double w = q->aty[j];
        for (int k = 0; k < q->m; k++)
            w -= q->gram[(size_t)j * (size_t)q->m + (size_t)k] * q->z[k];
        if (w > bw) {
            bw = w;
            best = j;
        }
    }
    return best;
}

/* Solve on the passive set; while a constrained coefficient would go negative, move to the
 * boundary and drop the coefficients that reached it. */
static void inner(nnls *q)
{
    for (int it = 0; it < 3 * q->m; it++) {
        solve_passive(q);
        double alpha = 2.0;
        for (int j = q->nfree; j < q->m; j++)
            if (q->passive[j] && q->s[j] <= 0) {
                double a = q->z[j] / (q->z[j] - q->s[j]);
                if (a < alpha) alpha = a;
            }
        if (alpha > 1.0) {
            memcpy(q->z, q->s, sizeof *q->z * (size_t)q->m);
            return;
        }
        for (int j = 0; j < q->m; j++) {
            q->z[j] += alpha * (q->s[j] - q->z[j]);
            if (j >= q->nfree && q->passive[j] && q->z[j] <= 1e-15) {
                q->passive[j] = 0;
                q->z[j] = 0;
            }
        }
    }
}

static void run(nnls *q)
{
    double scale = 0;
    for (int j = 0; j < q->m; j++)
        scale = fmax(scale, fabs(q->aty[j]));
    double tol = 1e-11 * (scale > 0 ? scale : 1.0);
    memset(q->z, 0, sizeof *q->z * (size_t)q->m);
    for (int j = 0; j < q->m; j++)
        q->passive[j] = j < q->nfree;
    inner(q);
    for (int it = 0; it < 3 * q->m; it++) {
        int j = entering(q, tol);
        if (j < 0) break;
        q->passive[j] = 1;
        inner(q);
    }
}

int prs__shape_fit(const double *x, const double *y, int n, int decreasing, double *g, int *dof)
{
    memcpy(g, y, sizeof *g * (size_t)n);
    if (dof) *dof = n;
    if (n < 3 || n > PRS__SHAPE_MAX_POINTS) return 0;
    nnls q = {n, n, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t mm = (size_t)n * (size_t)n;
    q.a = malloc(sizeof *q.a * mm);
    q.gram = malloc(sizeof *q.gram * mm);
    q.chol = malloc(sizeof *q.chol * mm);
    q.aty = malloc(sizeof *q.aty * (size_t)n);
    q.z = malloc(sizeof *q.z * (size_t)n);
    q.s = malloc(sizeof *q.s * (size_t)n);
    q.passive = malloc(sizeof *q.passive * (size_t)n);
    q.idx = malloc(sizeof *q.idx * (size_t)n);
    int ok = q.a && q.gram && q.chol && q.aty && q.z && q.s && q.passive && q.idx;
    if (ok) {
        basis(&q, x, decreasing);
        normal_equations(&q, y);
        run(&q);
        if (dof) {
            *dof = 0;
            for (int j = 0; j < n; j++)
                *dof += q.passive[j] && (j < q.nfree || q.z[j] > 0);
        }
        for (int i = 0; i < n; i++) {
            double v = 0;
            for (int j = 0; j < n; j++)
                v += q.a[(size_t)i * (size_t)n + (size_t)j] * q.z[j];
            g[i] = v;
        }
    }
    free(q.a);
    free(q.gram);
    free(q.chol);
    free(q.aty);
    free(q.z);
    free(q.s);
    free(q.passive);
    free(q.idx);
    return ok ? 0 : -1;
}
