/* The energy lower bound (cluster.h): the model's optimum for each instance period's mean load,
 * class by class, with nothing charged for changing configuration. Each pool's least power
 * comes from its exact sizing table (sizing.h) at the cluster's GPU count; leaving out the
 * coupling between pools (their GPUs together within the cluster's) and the rounding of the
 * load up to a unit (rounded down here) can only lower the figure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "sizing.h"

int prs_infer_lower_bound(const prs_infer_trace *trace, const prs_infer_captable *caps,
                          const prs_infer_opts *o, double *energy_j, prs_error *err)
{
    *energy_j = 0;
    int rc = prs_infer_opts_check(o, err);
    if (rc) return rc;
    if (trace->n == 0) return prs_error_set(err, PRS_EINVAL, "empty trace");
    double bin = o->instance_period_s;
    size_t n_bins = (size_t)(trace->reqs[trace->n - 1].arrival_s / bin) + 1;
    uint32_t *counts = calloc(n_bins * PRS_INFER_NCLASS, sizeof *counts);
    if (!counts) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (size_t i = 0; i < trace->n; i++) {
        size_t b = (size_t)(trace->reqs[i].arrival_s / bin);
        int k =
            prs_infer_class_of(&o->classes, trace->reqs[i].in_tokens, trace->reqs[i].out_tokens);
        counts[(b < n_bins ? b : n_bins - 1) * PRS_INFER_NCLASS + (size_t)k]++;
    }
    double total = 0;
    for (int k = 0; !rc && k < PRS_INFER_NCLASS; k++) {
        int any = 0;
        for (size_t b = 0; b < n_bins && !any; b++)
            any = counts[b * PRS_INFER_NCLASS + (size_t)k] > 0;
        if (!any) continue;
        prs_infer_pool_model m;
        prs_infer_pool_table t;
        rc = prs_infer_pool_model_build(caps, k, (1u << caps->n_tps) - 1, 1, o->units_top, 1.0, &m,
                                        err);
        if (!rc) rc = prs_infer_pool_table_build(&m, o->gpus, &t, err);
        if (rc) break;
        for (size_t b = 0; b < n_bins; b++) {
            double rate = counts[b * PRS_INFER_NCLASS + (size_t)k] / bin;
            int units = (int)floor(rate / m.unit_rps);
            if (units > t.kmax) units = t.kmax;
            total += prs_infer_pool_atmost(&t, o->gpus, units) * bin;
        }
        prs_infer_pool_table_free(&t);
    }
    free(counts);
    *energy_j = total;
    return rc;
}
