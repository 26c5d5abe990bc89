/* bench_change_cost: what charging clock changes does to the plan a job runs (docs/planner.md,
 * 'Clock changes'). For each change cost, plans a profile with that cost and reports, at the
 * frontier's fastest point (prs_frontier_lookup with no straggler, the plan a job runs), its
 * clock changes per iteration and its evaluated time and energy; beside it, the plan planned as
 * if changes were free, charged the same cost (what ignoring the cost would run), and the
 * planning time.
 *
 * usage: bench_change_cost PROFILE STAGES MICROBATCHES UNIT_S BLOCKING_W exp|hull US[,US...]
 * e.g.   bench_change_cost ../shared/data/sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv \
 *            8 12 0.001 83.64 exp 0,100,500 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perseus/planner.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The fastest point's plan of a frontier planned with opts into clocks; its figures. */
static int fastest(const prs_profile *prof, const prs_plan_opts *o, int *clocks, double *t,
                   double *e, double *plan_s)
{
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    size_t k = 0;
    double t0 = now_s();
    if (prs_plan(prof, o, &f, &err) || prs_frontier_lookup(f, 0, &k) ||
        prs_frontier_plan(f, k, clocks, &err)) {
        fprintf(stderr, "bench_change_cost: %s\n", err.msg);
        prs_frontier_free(f);
        return -1;
    }
    *plan_s = now_s() - t0;
    *t = prs_frontier_point_at(f, k)->eval_time_s;
    *e = prs_frontier_point_at(f, k)->eval_energy_j;
    prs_frontier_free(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: bench_change_cost PROFILE STAGES MICROBATCHES UNIT_S BLOCKING_W "
                        "exp|hull US[,US...]\n");
        return 2;
    }
    prs_profile *prof = NULL;
    prs_error err = {0, ""};
    if (prs_profile_load(argv[1], &prof, &err)) {
        fprintf(stderr, "bench_change_cost: %s\n", err.msg);
        return 1;
    }
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe.stages = atoi(argv[2]);
    o.pipe.microbatches = atoi(argv[3]);
    o.pipe.unit_time_s = atof(argv[4]);
    o.pipe.blocking_power_w = atof(argv[5]);
    if (prs_cost_model_parse(argv[6], &o.cost_model) || prs_pipeline_check(&o.pipe, &err)) {
        fprintf(stderr, "bench_change_cost: bad pipeline or cost model: %s\n", err.msg);
        prs_profile_free(prof);
        return 2;
    }
    size_t n = (size_t)o.pipe.stages * (size_t)prs_ops_per_stage(&o.pipe);
    int *free_plan = malloc(sizeof *free_plan * n), *plan = malloc(sizeof *plan * n);
    double ft, fe, fs, t, e, s;
    int rc = !free_plan || !plan || fastest(prof, &o, free_plan, &ft, &fe, &fs);
    printf("%s, %d stages, %d microbatches, unit %g s, %g W, %s: the fastest point\n", argv[1],
           o.pipe.stages, o.pipe.microbatches, o.pipe.unit_time_s, o.pipe.blocking_power_w,
           argv[6]);
    printf("%10s %8s %10s %12s | %28s | %8s\n", "cost_us", "changes", "time_s", "energy_j",
           "planned free: changes time energy", "plan_s");
    char *list = strdup(argv[7]);
    for (char *tok = strtok(list, ","); !rc && tok; tok = strtok(NULL, ",")) {
        o.pipe.change_cost_s = atof(tok) / 1e6;
        double ct = 0, ce = 0; /* the free plan, charged */
        if ((rc = fastest(prof, &o, plan, &t, &e, &s) ||
                  prs_evaluate_plan(prof, &o.pipe, free_plan, &ct, &ce, &err)))
            break;
        printf("%10s %8ld %10.3f %12.2f | %6ld %9.3f %11.2f | %8.2f\n", tok,
               prs_plan_count_changes(&o.pipe, plan), t, e,
               prs_plan_count_changes(&o.pipe, free_plan), ct, ce, s);
    }
    free(list);
    free(free_plan);
    free(plan);
    prs_profile_free(prof);
    return rc ? 1 : 0;
}
