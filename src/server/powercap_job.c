/* A job's power cap at run time (powercap_job.h). */
#include "powercap_job.h"

#include <stdlib.h>

#include "perseus/power.h"

void plan_powers_clear(plan_powers *pw)
{
    free(pw->avg_w);
    free(pw->peak_w);
    pw->avg_w = pw->peak_w = NULL;
    pw->n = 0;
}

int plan_powers_prepare(plan_powers *pw, const prs_frontier *f, const prs_profile *profile,
                        const prs_pipeline *pipe, int tp, int ops_per_stage)
{
    if (pw->peak_w) return 0;
    if (!f || !profile) return -1;
    size_t n = prs_frontier_size(f);
    double *avg = malloc(sizeof *avg * (n ? n : 1)), *peak = malloc(sizeof *peak * (n ? n : 1));
    int *clocks = malloc(sizeof *clocks * (size_t)pipe->stages * (size_t)ops_per_stage);
    prs_eval *ev = NULL; /* one evaluation context for every plan */
    int rc = avg && peak && clocks && prs_eval_open(profile, pipe, &ev, NULL) == 0 ? 0 : -1;
    for (size_t k = 0; k < n && !rc; k++) {
        prs_plan_power p;
        rc = prs_frontier_plan(f, k, clocks, NULL) ||
             prs_eval_power(ev, clocks, PRS_POWER_WINDOW_S, &p, NULL, NULL, NULL);
        if (rc) break;
        avg[k] = p.avg_power_w * tp; /* per pipeline: tp times the profile's */
        peak[k] = p.peak_power_w * tp;
    }
    prs_eval_close(ev);
    free(clocks);
    if (rc) {
        free(avg);
        free(peak);
        return -1;
    }
    *pw = (plan_powers){avg, peak, n};
    return 0;
}

static double plan_time_s(const prs_frontier *f, long k)
{
    const prs_frontier_point *p = prs_frontier_point_at(f, (size_t)k);
    return p ? p->eval_time_s : 0;
}

long plan_powers_cap_plan(const plan_powers *pw, const prs_frontier *f, double cap_w, int *feasible)
{
    if (feasible) *feasible = 1;
    if (!(cap_w > 0) || !pw->peak_w || !f) return -1;
    long best = -1, lowest = -1;
    for (size_t k = 0; k < pw->n; k++) {
        long i = (long)k;
        if (lowest < 0 || pw->peak_w[k] < pw->peak_w[lowest]) lowest = i;
        if (pw->peak_w[k] <= cap_w && (best < 0 || plan_time_s(f, i) < plan_time_s(f, best)))
            best = i;
    }
    if (best >= 0) return best;
    if (feasible) *feasible = 0;
    return lowest;
}

long frontier_slower_plan(const prs_frontier *f, long a, long b)
{
    if (a < 0) return b;
    if (b < 0) return a;
    return plan_time_s(f, b) > plan_time_s(f, a) ? b : a;
}

json_t *plan_powers_json(const plan_powers *pw, long plan)
{
    if (!pw->peak_w || plan < 0 || (size_t)plan >= pw->n) return json_null();
    return json_pack("{s:f, s:f}", "avg_w", pw->avg_w[plan], "peak_w", pw->peak_w[plan]);
}

json_t *plan_powers_cap_json(const plan_powers *pw, const prs_frontier *f, double cap_w, int dp)
{
    int feasible = 1;
    long plan = cap_w > 0 ? plan_powers_cap_plan(pw, f, cap_w / dp, &feasible) : -1;
    json_t *o = json_pack("{s:s, s:f}", "on", "peak", "window_s", PRS_POWER_WINDOW_S);
    if (!o) return NULL;
    json_object_set_new(o, "cap_w", cap_w > 0 ? json_real(cap_w) : json_null());
    json_object_set_new(o, "per_pipeline_w", cap_w > 0 ? json_real(cap_w / dp) : json_null());
    json_object_set_new(o, "plan_id", plan >= 0 ? json_integer(plan) : json_null());
    json_object_set_new(o, "feasible", plan >= 0 ? json_boolean(feasible) : json_null());
    return o;
}
