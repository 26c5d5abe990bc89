/* What each level of the dynamic policy chooses for a given load (plan.c), for `perseus infer
 * plan`: the GPUs of each pool (cluster level), the pool's instances and their TP (pool level)
 * and each instance's clock (instance level), with the model's power; and the singlepool
 * configuration for the same total load. */
#ifndef PRS_INFER_PLAN_H
#define PRS_INFER_PLAN_H

#include "capacity.h"
#include "cluster.h"

#define PRS_INFER_PLAN_MAX_INST 256

typedef struct prs_infer_plan_inst {
    int tp, mhz;
    double load_rps;
    double power_w;
} prs_infer_plan_inst;

typedef struct prs_infer_plan_pool {
    double load_rps;
    int gpus;
    double power_w;
    int n_inst;
    prs_infer_plan_inst inst[PRS_INFER_PLAN_MAX_INST];
} prs_infer_plan_pool;

typedef struct prs_infer_plan {
    prs_infer_plan_pool pool[PRS_INFER_NCLASS];
    int gpus;
    double power_w;
    int single_instances; /* singlepool: TP-top instances at the top clock for the total */
    int single_gpus;
    double single_power_w;
} prs_infer_plan;

/* Plan for rates_rps[9] (requests/s per class). PRS_EINVAL naming the class when no
 * configuration serves a class with load; PRS_ERANGE when the load does not fit o->gpus, or when
 * its least power exceeds o->power_cap_w (a budget, when > 0). */
int prs_infer_plan_load(const prs_infer_captable *caps, const prs_infer_opts *o,
                        const double *rates_rps, prs_infer_plan *out, prs_error *err);

/* Pool entry pp of a plan: the optimum of table t with exactly g GPUs carrying k units (load
 * rate requests/s), its instances, clocks and power. */
struct prs_infer_pool_table;
void prs_infer_plan_fill_pool(const prs_infer_captable *caps, const struct prs_infer_pool_table *t,
                              int g, int k, double rate, prs_infer_plan_pool *pp);

#endif
