/* The dynamic policy's cluster and pool levels as decisions on counts (levels.c), shared by the
 * emulator's policies (policy.c) and by the levels perseusd runs online on reported loads
 * (online.h), so that both decide alike on the same loads.
 *
 *   cluster level: the GPUs each pool may hold, by the exact split of the cluster (sizing.h) at
 *     each pool's forecast load; when the load does not fit, the largest uniform share of it
 *     that does;
 *   pool level: the optimum instance mix for the pool's forecast within its GPUs;
 *   reconfiguration: a pool change costs the idle energy of the GPUs of its new instances while
 *     they start (start_s, loading weights) or re-form over weights the pool gives up in the
 *     same change (reshard_s); it is made only when the power it saves over the next period
 *     exceeds that cost, or when the pool's instances cannot carry the load. */
#ifndef PRS_INFER_LEVELS_H
#define PRS_INFER_LEVELS_H

#include "sizing.h"

enum { PRS_INFER_SPLIT_FITS, PRS_INFER_SPLIT_CAP_SHORT, PRS_INFER_SPLIT_UNDER };

/* Split gpus among npools pools carrying k[p] units, within cap_w watts (a budget when > 0), into
 * g[p]. When they cannot all be carried, k is lowered in place to the largest uniform share of
 * it that can. Returns PRS_INFER_SPLIT_FITS, or why it did not: PRS_INFER_SPLIT_CAP_SHORT (the
 * GPUs would carry it, their least power exceeds the budget), PRS_INFER_SPLIT_UNDER. */
int prs_infer_levels_split(const prs_infer_pool_table *const *t, int npools, int gpus, double cap_w,
                           int *k, int *g);

/* The pool level's choice for k units within *budget GPUs (exactly *budget when exact_only):
 * when grow, the budget first takes as many of free_gpus as the load needs. count[n] instances
 * of the model's type n; *k_out the units planned (k lowered to what fits), *power_w their
 * least power. Returns the GPUs used, or -1 when no configuration exists. */
int prs_infer_levels_pool(const prs_infer_pool_table *t, int *budget, int free_gpus, int grow,
                          int exact_only, int k, int *count, int *k_out, double *power_w);

/* Power of instances of the model's types types[0..n) (-1: a type the model lacks, carrying
 * nothing) carrying k units split in proportion to their capacity; INFINITY when they cannot. */
double prs_infer_levels_power(const prs_infer_pool_model *m, const int *types, int n, int k);

/* The energy (J) of a pool change adding add_gpus and dropping drop_gpus GPUs: the added GPUs
 * idle (idle_per_gpu_w) for reshard_s where dropped GPUs can take them, start_s otherwise. */
double prs_infer_levels_reconf_j(double idle_per_gpu_w, int add_gpus, int drop_gpus,
                                 double reshard_s, double start_s);

/* 1 when a change from cur_w to new_w saves more than cost_j over period_s, or when the current
 * instances cannot carry the load (cur_w not finite). */
int prs_infer_levels_pays(double cur_w, double new_w, double period_s, double cost_j);

#endif
