/* An exact reference for the planner: the discrete time-energy problem as a mixed-integer linear
 * program solved by GLPK's branch and cut (glp_intopt) or CBC's (Cbc_solve). Used by
 * tests/core/test_milp.c and by tests/ref/optimum_table.c (scripts/optimum-table.sh). Test code,
 * not part of the library. */
#ifndef PRS_TESTS_MILP_REF_H
#define PRS_TESTS_MILP_REF_H

#include "perseus/planner.h"
#include "perseus/profile.h"

typedef struct prs_milp prs_milp;

/* Relative gap between the best plan and the bound at which a solve stops as optimal. */
#define PRS_MILP_GAP 1e-7

typedef struct prs_milp_result {
    int status;      /* PRS_MILP_OPTIMAL (within PRS_MILP_GAP), PRS_MILP_FEASIBLE (time limit),
                        PRS_MILP_INFEASIBLE */
    double energy_j; /* best plan found: its energy, blocking power to T included */
    double bound_j;  /* proven lower bound on the optimum's energy (== energy_j if optimal) */
    long plan_units; /* the best plan's own critical path (<= T) */
    double seconds;  /* wall time of the solve */
} prs_milp_result;

enum { PRS_MILP_OPTIMAL = 0, PRS_MILP_FEASIBLE = 1, PRS_MILP_INFEASIBLE = 2 };

/* Build the model of (profile, pipe): every profiled clock of every computation (options
 * dominated in quantized time and effective energy dropped, which cannot change the optimum).
 * NULL on error (message in err). */
prs_milp *prs_milp_new(const prs_profile *profile, const prs_pipeline *pipe, prs_error *err);
void prs_milp_free(prs_milp *m);

/* The solver of the next solves: GLPK (the default) or CBC, whose cuts and heuristics prove
 * tighter bounds and find better plans on the larger cases; threads: CBC's worker threads
 * (1..64; more than 1 makes its search depend on timing). -1 on a bad argument. */
typedef enum { PRS_MILP_GLPK = 0, PRS_MILP_CBC = 1 } prs_milp_solver;
int prs_milp_set_solver(prs_milp *m, prs_milp_solver solver, int threads);

/* Least energy of any plan whose critical path is <= T units, blocking power up to T included:
 * min sum(e - P_block q tau) + stages P_block T tau. start (may be NULL): clocks of a known plan
 * within T, given to the solver as its first incumbent. time_limit_s bounds the solve; the
 * result then holds the best plan and the best bound found. The returned plan (clocks, one per
 * computation, may be NULL) is checked by prs_evaluate_plan by the callers. */
int prs_milp_solve(prs_milp *m, long T, const int *start, double time_limit_s, prs_milp_result *res,
                   int *clocks, prs_error *err);

#endif
