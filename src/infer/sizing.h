/* Pool sizing as an exact integer optimisation (sizing.c).
 *
 * The model: a pool's load is counted in units of unit_rps (rounded up); an instance of type a
 * (a TP degree, tp[a] GPUs) carries j = 0..units[a] units at power power[a][j] (the least over
 * the clocks allowed, from the capacity table). A pool configuration is a multiset of instances
 * and a split of the load among them. For every GPU count g <= G and load k the table holds the
 * least power of a configuration using exactly g GPUs (exact) and at most g GPUs (atmost), by
 * dynamic programming over instances (an unbounded knapsack in two dimensions): exact[g][k] =
 * min over a, j of exact[g - tp[a]][k - j] + power[a][j]. Every configuration is a sequence of
 * such steps, so the minimum is the true optimum of the model (tests/infer/test_infer_sizing.c
 * checks it against exhaustive search). The cluster level splits G among the pools by a second
 * DP over pools, also exact: F[c][g] = min over g_c of F[c-1][g - g_c] + atmost_c[g_c][k_c]. */
#ifndef PRS_INFER_SIZING_H
#define PRS_INFER_SIZING_H

#include "capacity.h"

#define PRS_INFER_MAX_UNITS 64 /* units an instance carries, at most */

typedef struct prs_infer_pool_model {
    int n_types;
    int tp[PRS_INFER_MAX_TPS];
    int units[PRS_INFER_MAX_TPS];                               /* capacity, in units */
    int clock_of[PRS_INFER_MAX_TPS][PRS_INFER_MAX_UNITS + 1];   /* the clock index chosen */
    double power_w[PRS_INFER_MAX_TPS][PRS_INFER_MAX_UNITS + 1]; /* at j units */
    double unit_rps;
} prs_infer_pool_model;

typedef struct prs_infer_pool_table {
    prs_infer_pool_model m;
    int gpus, kmax;
    double *exact, *atmost; /* (gpus+1) x (kmax+1), INFINITY where infeasible */
    int *choice;            /* exact: a * (PRS_INFER_MAX_UNITS+1) + j of the last instance */
    int *atmost_g;          /* atmost: the g' <= g reaching it */
} prs_infer_pool_table;

/* The pool model of mix k from the capacity table: TP degrees in tp_mask (bit a: t->tps[a]),
 * clocks all (clock_knob) or the highest only; an instance carries at most max_util (0, 1] of
 * its probed capacity; an instance carries at most max_util (0, 1] of
 * its probed capacity; the largest load is divided into units_top units for the type that
 * carries most. PRS_EINVAL when no allowed configuration
 * meets the SLO ("class XX: no configuration meets its SLOs"). */
int prs_infer_pool_model_build(const prs_infer_captable *t, int k, unsigned tp_mask, int clock_knob,
                               int units_top, double max_util, prs_infer_pool_model *m,
                               prs_error *err);

int prs_infer_pool_table_build(const prs_infer_pool_model *m, int gpus, prs_infer_pool_table *out,
                               prs_error *err);
void prs_infer_pool_table_free(prs_infer_pool_table *t);

/* Load units of rate_rps (rounded up). */
int prs_infer_pool_units(const prs_infer_pool_table *t, double rate_rps);
/* Least power of at most / exactly g GPUs carrying k units (INFINITY if infeasible; k beyond
 * kmax is infeasible). */
double prs_infer_pool_atmost(const prs_infer_pool_table *t, int g, int k);
double prs_infer_pool_exact(const prs_infer_pool_table *t, int g, int k);

/* The instances of the optimum with exactly g GPUs and k units: count[a] instances of type a,
 * and each one's load (units, in loads[], n of them, at most cap). Returns n or -1 if
 * infeasible. */
int prs_infer_pool_instances(const prs_infer_pool_table *t, int g, int k, int count[],
                             int loads_type[], int loads_units[], int cap);

/* Split gpus among npools pools carrying k[c] units: g[c] minimising the sum of atmost powers.
 * Returns the total power, or INFINITY when no split carries the load. */
double prs_infer_cluster_split(const prs_infer_pool_table *const *tables, const int *k, int npools,
                               int gpus, int *g);

#endif
