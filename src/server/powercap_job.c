/* A job's power cap at run time (powercap_job.h). */
#include "powercap_job.h"

#include <stdlib.h>

#include "perseus/power.h"

void job_power_clear(job *j)
{
    free(j->plan_avg_w);
    free(j->plan_peak_w);
    j->plan_avg_w = j->plan_peak_w = NULL;
    j->nplan_power = 0;
}

/* Plan k's power into avg[k], peak[k] (per pipeline: tp times the profile's). */
static int eval_plan(const job *j, const prs_pipeline *pipe, size_t k, int *clocks, double *avg,
                     double *peak)
{
    prs_plan_power pw;
    if (prs_frontier_plan(j->frontier, k, clocks, NULL) ||
        prs_plan_power_of(j->profile, pipe, clocks, PRS_POWER_WINDOW_S, &pw, NULL))
        return -1;
    avg[k] = pw.avg_power_w * j->spec.tp;
    peak[k] = pw.peak_power_w * j->spec.tp;
    return 0;
}

int job_power_prepare(job *j)
{
    if (j->plan_peak_w) return 0;
    if (!j->frontier || !j->profile) return -1;
    size_t n = prs_frontier_size(j->frontier);
    prs_pipeline pipe;
    job_pipeline(j, &pipe);
    double *avg = malloc(sizeof *avg * (n ? n : 1)), *peak = malloc(sizeof *peak * (n ? n : 1));
    int *clocks = malloc(sizeof *clocks * (size_t)j->spec.stages * (size_t)j->ops_per_stage);
    int rc = avg && peak && clocks ? 0 : -1;
    for (size_t k = 0; k < n && !rc; k++)
        rc = eval_plan(j, &pipe, k, clocks, avg, peak);
    free(clocks);
    if (rc) {
        free(avg);
        free(peak);
        return -1;
    }
    j->plan_avg_w = avg;
    j->plan_peak_w = peak;
    j->nplan_power = n;
    return 0;
}

static double plan_time_s(const job *j, long k)
{
    const prs_frontier_point *p = prs_frontier_point_at(j->frontier, (size_t)k);
    return p ? p->eval_time_s : 0;
}

long job_cap_plan(const job *j, int *feasible)
{
    if (feasible) *feasible = 1;
    if (!(j->spec.power_cap_w > 0) || !j->plan_peak_w || !j->frontier) return -1;
    double cap = j->spec.power_cap_w / j->spec.dp;
    long best = -1, lowest = -1;
    for (size_t k = 0; k < j->nplan_power; k++) {
        long i = (long)k;
        if (lowest < 0 || j->plan_peak_w[k] < j->plan_peak_w[lowest]) lowest = i;
        if (j->plan_peak_w[k] <= cap && (best < 0 || plan_time_s(j, i) < plan_time_s(j, best)))
            best = i;
    }
    if (best >= 0) return best;
    if (feasible) *feasible = 0;
    return lowest;
}

long job_slower_plan(const job *j, long a, long b)
{
    if (a < 0) return b;
    if (b < 0) return a;
    return plan_time_s(j, b) > plan_time_s(j, a) ? b : a;
}

json_t *job_plan_power_json(const job *j, long plan)
{
    if (!j->plan_peak_w || plan < 0 || (size_t)plan >= j->nplan_power) return json_null();
    return json_pack("{s:f, s:f}", "avg_w", j->plan_avg_w[plan], "peak_w", j->plan_peak_w[plan]);
}

json_t *job_power_cap_json(const job *j)
{
    double cap = j->spec.power_cap_w;
    int feasible = 1;
    long plan = job_cap_plan(j, &feasible);
    json_t *o = json_pack("{s:s, s:f}", "on", "peak", "window_s", PRS_POWER_WINDOW_S);
    if (!o) return NULL;
    json_object_set_new(o, "cap_w", cap > 0 ? json_real(cap) : json_null());
    json_object_set_new(o, "per_pipeline_w", cap > 0 ? json_real(cap / j->spec.dp) : json_null());
    json_object_set_new(o, "plan_id", plan >= 0 ? json_integer(plan) : json_null());
    json_object_set_new(o, "feasible", plan >= 0 ? json_boolean(feasible) : json_null());
    return o;
}
