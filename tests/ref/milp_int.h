/* The MILP reference's internals, shared by its two solvers: GLPK's branch and cut (milp_ref.c)
 * and CBC's (milp_cbc.c). Columns are numbered from 1 as GLPK numbers them: 1..nnodes are the
 * event times, then every computation's option columns. */
#ifndef PRS_TESTS_MILP_INT_H
#define PRS_TESTS_MILP_INT_H

#include <glpk.h>

#include "milp_ref.h"
#include "perseus/evaluate.h"
#include "plan_int.h"

struct prs_milp {
    prs_pipeline pipe;
    prs_eval *ev;
    glp_prob *lp; /* the model; solved by GLPK, or exported to CBC */
    prs_milp_solver solver;
    int threads; /* CBC only */
    int nops;
    int *col0, *nopt; /* per op: first z column, number of options */
    int *opt;         /* per type, options kept (table entries), type-major */
    int *ostart;      /* per type: first entry in opt */
    int col_sink;
    int ncols;
    /* GLPK solve state for its callback */
    const int *start;
    double bound;
    int gave_start;
};

/* Effective energy of table entry k: e - P_block q tau. */
double prs__milp_eff_cost(const prs_milp *m, int k);

/* The column values x[1..ncols] of the plan start (clocks per computation): each computation's
 * kept option at least as good as its clock, event times at their earliest. x[0] is unused.
 * Non-zero when a clock is not among the options (or out of memory). */
int prs__milp_start_x(const prs_milp *m, const int *start, double *x);

/* Fill res and clocks from a solver's answer: status (PRS_MILP_OPTIMAL or PRS_MILP_FEASIBLE),
 * objective and bound without the blocking term, column values x[1..ncols]. */
int prs__milp_finish(const prs_milp *m, long T, int status, double obj, double bound,
                     const double *x, prs_milp_result *res, int *clocks, prs_error *err);

/* Seconds on the monotonic clock. */
double prs__milp_now(void);

/* CBC's branch and cut (milp_cbc.c), same contract as prs_milp_solve. */
int prs__milp_solve_cbc(prs_milp *m, long T, const int *start, double time_limit_s,
                        prs_milp_result *res, int *clocks, prs_error *err);

#endif
