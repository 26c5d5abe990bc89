/* The cluster and pool levels' decisions on counts (levels.h), moved out of the emulator's
 * policies (policy.c) so that perseusd's online levels (online.c) make the same ones. */
#include "levels.h"

#include <math.h>
#include <string.h>

/* 1 when a split carries k within the power budget (the least-power split). */
static int split_fits(const prs_infer_pool_table *const *t, int npools, int gpus, double cap_w,
                      int *k, int *g)
{
    double w = prs_infer_cluster_split(t, k, npools, gpus, g);
    return isfinite(w) && (!(cap_w > 0) || w <= cap_w);
}

int prs_infer_levels_split(const prs_infer_pool_table *const *t, int npools, int gpus, double cap_w,
                           int *k, int *g)
{
    if (split_fits(t, npools, gpus, cap_w, k, g)) return PRS_INFER_SPLIT_FITS;
    int why = isfinite(prs_infer_cluster_split(t, k, npools, gpus, g)) ? PRS_INFER_SPLIT_CAP_SHORT
                                                                       : PRS_INFER_SPLIT_UNDER;
    int full[PRS_INFER_NCLASS] = {0};
    memcpy(full, k, sizeof(int) * (size_t)npools);
    double lo = 0, hi = 1;
    for (int it = 0; it < 30; it++) {
        double mid = (lo + hi) / 2;
        for (int p = 0; p < npools; p++)
            k[p] = (int)floor(full[p] * mid);
        if (split_fits(t, npools, gpus, cap_w, k, g))
            lo = mid;
        else
            hi = mid;
    }
    for (int p = 0; p < npools; p++)
        k[p] = (int)floor(full[p] * lo);
    prs_infer_cluster_split(t, k, npools, gpus, g);
    return why;
}

int prs_infer_levels_pool(const prs_infer_pool_table *t, int *budget, int free_gpus, int grow,
                          int exact_only, int k, int *count, int *k_out, double *power_w)
{
    if (grow)
        while (free_gpus > 0 && !isfinite(prs_infer_pool_atmost(t, *budget, k))) {
            (*budget)++;
            free_gpus--;
        }
    int g = *budget;
    while (k > 0 &&
           !isfinite(exact_only ? prs_infer_pool_exact(t, g, k) : prs_infer_pool_atmost(t, g, k)))
        k--;
    if (!exact_only) g = t->atmost_g[(size_t)g * (size_t)(t->kmax + 1) + (size_t)k];
    if (g < 0) g = 0;
    int lt[1], lu[1];
    if (prs_infer_pool_instances(t, g, k, count, lt, lu, 0) < 0) return -1;
    *k_out = k;
    *power_w = prs_infer_pool_exact(t, g, k);
    return g;
}

double prs_infer_levels_power(const prs_infer_pool_model *m, const int *types, int n, int k)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += types[i] >= 0 ? m->units[types[i]] : 0;
    if (total < k) return INFINITY;
    double pw = 0;
    for (int i = 0; i < n; i++) {
        int a = types[i];
        if (a < 0) continue;
        double j = total ? (double)k * m->units[a] / total : 0;
        int j0 = (int)floor(j);
        int j1 = j0 < m->units[a] ? j0 + 1 : j0;
        pw += m->power_w[a][j0] + (m->power_w[a][j1] - m->power_w[a][j0]) * (j - j0);
    }
    return pw;
}

double prs_infer_levels_reconf_j(double idle_per_gpu_w, int add_gpus, int drop_gpus,
                                 double reshard_s, double start_s)
{
    int reshard = add_gpus < drop_gpus ? add_gpus : drop_gpus;
    return idle_per_gpu_w * (reshard * reshard_s + (add_gpus - reshard) * start_s);
}

int prs_infer_levels_pays(double cur_w, double new_w, double period_s, double cost_j)
{
    return !isfinite(cur_w) || (cur_w - new_w) * period_s > cost_j;
}
