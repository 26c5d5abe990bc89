/* Pooling computation types that share a shape (src/core/pool.c), for the robust planner's
 * reconciliation (src/core/reconcile.c). Module prefix prs__pool_. */
#ifndef PRS_POOL_H
#define PRS_POOL_H

/* v: ntypes x nclocks positive measurements (row-major), every type over the same clocks. Fits
 * log v = a_type + h_clock (each type a scale of one shared shape) by least squares, replacing
 * outliers (beyond 4 robust deviations) by the fit; a type whose residuals over a band of
 * neighbouring clocks are off by more than 3 standard errors has a shape of its own and leaves
 * the pool, and the fit is redone. out gets the fit for members (member[i] = 1) and v for the
 * others. Returns the relative standard error of a member's fitted value, 0 when fewer than two
 * types stay; -1 when out of memory (out is then v, no members). *noise: the relative noise of
 * one value, the robust deviation of the members' residuals (when fewer than two stay, of all
 * the types' residuals from the first fit; -1 when there are fewer than two types or three
 * clocks). */
double prs__pool_fit(const double *v, int ntypes, int nclocks, double *out, int *member,
                     double *noise);

/* The median of v[0..n) (n >= 1), sorting v in place. */
double prs__pool_median(double *v, int n);

#endif
