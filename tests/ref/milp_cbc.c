/* The MILP solved by CBC (COIN-OR branch and cut, through its C interface): the GLPK problem
 * milp_ref.c built is exported column by column into a fresh CBC model per solve, the known plan
 * is given as a MIP start, and the answer goes back through prs__milp_finish. */
#include <Cbc_C_Interface.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milp_int.h"

/* Lower and upper bound of a GLPK column or row of type ty. */
static void bounds_of(int ty, double lb, double ub, double *lo, double *hi)
{
    *lo = (ty == GLP_FR || ty == GLP_UP) ? -DBL_MAX : lb;
    *hi = (ty == GLP_FR || ty == GLP_LO) ? DBL_MAX : ub;
}

typedef struct cbc_data {
    int ncols, nrows;
    CoinBigIndex *start;
    int *index;
    double *value, *collb, *colub, *obj, *rowlb, *rowub;
} cbc_data;

static void export_free(cbc_data *x)
{
    free(x->start);
    free(x->index);
    free(x->value);
    free(x->collb);
    free(x->colub);
    free(x->obj);
    free(x->rowlb);
    free(x->rowub);
}

/* The GLPK problem in CBC's column-major form (0-based); non-zero when out of memory. */
static int export_lp(glp_prob *lp, cbc_data *x)
{
    memset(x, 0, sizeof *x);
    x->ncols = glp_get_num_cols(lp);
    x->nrows = glp_get_num_rows(lp);
    size_t nc = (size_t)x->ncols, nr = (size_t)x->nrows, nnz = (size_t)glp_get_num_nz(lp);
    int *ind = malloc(sizeof *ind * (nr + 1));
    double *val = malloc(sizeof *val * (nr + 1));
    x->start = malloc(sizeof *x->start * (nc + 1));
    x->index = malloc(sizeof *x->index * (nnz + 1));
    x->value = malloc(sizeof *x->value * (nnz + 1));
    x->collb = malloc(sizeof *x->collb * nc);
    x->colub = malloc(sizeof *x->colub * nc);
    x->obj = malloc(sizeof *x->obj * nc);
    x->rowlb = malloc(sizeof *x->rowlb * (nr + 1));
    x->rowub = malloc(sizeof *x->rowub * (nr + 1));
    int ok = ind && val && x->start && x->index && x->value && x->collb && x->colub && x->obj &&
             x->rowlb && x->rowub;
    CoinBigIndex k = 0;
    for (int j = 1; ok && j <= x->ncols; j++) {
        x->start[j - 1] = k;
        int len = glp_get_mat_col(lp, j, ind, val);
        for (int i = 1; i <= len; i++, k++) {
            x->index[k] = ind[i] - 1;
            x->value[k] = val[i];
        }
        bounds_of(glp_get_col_type(lp, j), glp_get_col_lb(lp, j), glp_get_col_ub(lp, j),
                  &x->collb[j - 1], &x->colub[j - 1]);
        x->obj[j - 1] = glp_get_obj_coef(lp, j);
    }
    if (ok) x->start[x->ncols] = k;
    for (int i = 1; ok && i <= x->nrows; i++)
        bounds_of(glp_get_row_type(lp, i), glp_get_row_lb(lp, i), glp_get_row_ub(lp, i),
                  &x->rowlb[i - 1], &x->rowub[i - 1]);
    free(ind);
    free(val);
    return ok ? 0 : -1;
}

/* The model with its integer columns, limits and the MIP start (start may be NULL) into *out;
 * fails when out of memory or when a clock of start is not among the options. */
static int load(const prs_milp *m, const cbc_data *x, const int *start, double time_limit_s,
                Cbc_Model **out, prs_error *err)
{
    double *sx = start ? malloc(sizeof *sx * ((size_t)x->ncols + 1)) : NULL;
    int *cols = start ? malloc(sizeof *cols * (size_t)x->ncols) : NULL;
    Cbc_Model *cbc = Cbc_newModel();
    int rc = 0;
    if (!cbc || (start && (!sx || !cols))) {
        rc = prs_error_set(err, PRS_ENOMEM, "out of memory loading the MILP into CBC");
    } else if (start && prs__milp_start_x(m, start, sx)) {
        rc =
            prs_error_set(err, PRS_EINVAL, "the starting plan has a clock the MILP does not offer");
    } else {
        Cbc_loadProblem(cbc, x->ncols, x->nrows, x->start, x->index, x->value, x->collb, x->colub,
                        x->obj, x->rowlb, x->rowub);
        for (int j = 1; j <= x->ncols; j++)
            if (glp_get_col_kind(m->lp, j) != GLP_CV) Cbc_setInteger(cbc, j - 1);
        Cbc_setLogLevel(cbc, 0);
        Cbc_setParameter(cbc, "timeMode", "elapsed"); /* the limit in wall time, not CPU time */
        Cbc_setMaximumSeconds(cbc, time_limit_s);
        Cbc_setAllowableFractionGap(cbc, PRS_MILP_GAP);
        char threads[16];
        snprintf(threads, sizeof threads, "%d", m->threads);
        if (m->threads > 1) Cbc_setParameter(cbc, "threads", threads);
        for (int j = 0; start && j < x->ncols; j++)
            cols[j] = j;
        if (start) Cbc_setMIPStartI(cbc, x->ncols, cols, sx + 1);
    }
    if (rc && cbc) Cbc_deleteModel(cbc);
    free(sx);
    free(cols);
    *out = rc ? NULL : cbc;
    return rc;
}

/* The answer of a finished solve into res and clocks. */
static int answer(const prs_milp *m, Cbc_Model *cbc, long T, int rc, prs_milp_result *res,
                  int *clocks, prs_error *err)
{
    const double *sol = Cbc_bestSolution(cbc);
    /* (Cbc_isInitialSolveProvenPrimalInfeasible also answers 1 when the MIP start is already
     * optimal and the relaxation cannot beat it: not used) */
    if (!sol && Cbc_isProvenInfeasible(cbc)) {
        res->status = PRS_MILP_INFEASIBLE;
        return 0;
    }
    if (!sol)
        return prs_error_set(err, PRS_EINVAL, "CBC found no integer solution at T = %ld (%s)", T,
                             Cbc_isSecondsLimitReached(cbc) ? "time limit" : "stopped");
    if (rc < 0 || Cbc_isAbandoned(cbc))
        return prs_error_set(err, PRS_EINVAL, "CBC abandoned the solve at T = %ld (%d)", T, rc);
    int n = Cbc_getNumCols(cbc);
    if (n != m->ncols)
        return prs_error_set(err, PRS_EINVAL, "CBC answered %d columns, the MILP has %d", n,
                             m->ncols);
    double *xv = malloc(sizeof *xv * ((size_t)n + 1));
    if (!xv) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    memcpy(xv + 1, sol, sizeof *xv * (size_t)n);
    int status = Cbc_isProvenOptimal(cbc) ? PRS_MILP_OPTIMAL : PRS_MILP_FEASIBLE;
    rc = prs__milp_finish(m, T, status, Cbc_getObjValue(cbc), Cbc_getBestPossibleObjValue(cbc), xv,
                          res, clocks, err);
    free(xv);
    return rc;
}

int prs__milp_solve_cbc(prs_milp *m, long T, const int *start, double time_limit_s,
                        prs_milp_result *res, int *clocks, prs_error *err)
{
    cbc_data x;
    if (export_lp(m->lp, &x)) {
        export_free(&x);
        return prs_error_set(err, PRS_ENOMEM, "out of memory exporting the MILP");
    }
    double t0 = prs__milp_now();
    Cbc_Model *cbc = NULL;
    int rc = load(m, &x, start, time_limit_s, &cbc, err);
    export_free(&x);
    if (rc) return rc;
    rc = Cbc_solve(cbc);
    res->seconds = prs__milp_now() - t0;
    rc = answer(m, cbc, T, rc, res, clocks, err);
    Cbc_deleteModel(cbc);
    return rc;
}
