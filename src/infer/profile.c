/* An inference profile as a value (profile.h, profile_int.h): its phases' names, its accessors
 * and its freeing. Reading one is profile_csv.c's; building its tables, profile_build.c's;
 * answering from it, profile_perf.c's. */
#include <stdlib.h>

#include "profile_int.h"

static const char *const PHASE_NAMES[] = {"prefill", "decode", "idle", "capacity"};

const char *prs__infer_phase_name(int phase)
{
    return phase >= 0 && phase < 4 ? PHASE_NAMES[phase] : "?";
}

void prs_infer_profile_free(prs_infer_profile *p)
{
    if (!p) return;
    if (p->pts)
        for (int i = 0; i < p->ntp * p->nclk; i++)
            for (int ph = 0; ph < 2; ph++) {
                prs__infer_grid *g = &p->pts[i].phase[ph];
                free(g->batch);
                free(g->tokens);
                free(g->time_s);
                free(g->energy_j);
            }
    free(p->pts);
    free(p->tps);
    free(p->clocks);
    free(p->kv_tokens);
    free(p->max_batch);
    free(p);
}

const char *prs_infer_profile_model(const prs_infer_profile *p)
{
    return p ? p->model : "";
}

const char *prs_infer_profile_gpu(const prs_infer_profile *p)
{
    return p ? p->gpu : "";
}
