/* Shape-constrained least squares in one variable (src/core/shapefit.c): the fit the robust
 * planner's reconciliation uses (src/core/reconcile.c). Module prefix prs__shape_. */
#ifndef PRS_SHAPEFIT_H
#define PRS_SHAPEFIT_H

/* Most points one fit takes (the work grows with the cube of the count). */
#define PRS__SHAPE_MAX_POINTS 128

/* g = the least-squares fit of y over x (ascending, distinct; 3 <= n <= PRS__SHAPE_MAX_POINTS)
 * among the convex functions of x, and with decreasing among those also non-increasing.
 * *dof (may be NULL) gets the fit's degrees of freedom: its non-zero coefficients in the hinge
 * basis (n when the data is copied). 0, or -1 when out of memory (g is then a copy of y). */
int prs__shape_fit(const double *x, const double *y, int n, int decreasing, double *g, int *dof);

#endif
