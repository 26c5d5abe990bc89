/* load_server: a straggler reported on pipeline 0 and cleared again, every rank's schedule checked
 * after each step. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "load_server.h"

/* ---- schedule checks (straggler phase) ---- */

void ls_done_check(gen *g, xfer *x, json_t *o)
{
    int r = x->id, dp = r / g->stages;
    json_t *pid = json_object_get(o, "plan_id"), *st = json_object_get(o, "straggler");
    if (ls_json_phase(o) != PH_RUNNING || !json_is_integer(pid) || !json_is_boolean(st)) {
        ls_check_failed(g, "rank %d: not a running schedule: %.200s", r, x->resp.p);
        return;
    }
    long plan = (long)json_integer_value(pid);
    int strag = json_is_true(st);
    if (g->expect_plan[dp] < 0) { /* recording: every rank of a pipeline must agree */
        g->expect_plan[dp] = plan;
        g->expect_strag[dp] = strag;
    }
    if (plan != g->expect_plan[dp] || strag != g->expect_strag[dp]) {
        if (!g->mismatches++)
            snprintf(g->first_mismatch, sizeof g->first_mismatch,
                     "rank %d (dp %d): plan %ld straggler %s, expected plan %ld straggler %s", r,
                     dp, plan, strag ? "true" : "false", g->expect_plan[dp],
                     g->expect_strag[dp] ? "true" : "false");
    }
}

/* GET every rank's schedule through the pool; mismatches against g->expect_* (a pipeline whose
 * expectation is -1 takes its first answer). */
static int check_schedules(gen *g, double *secs)
{
    double t0 = ls_now_s(), deadline = t0 + DEADLINE_CHECK_S;
    g->mismatches = 0;
    g->first_mismatch[0] = '\0';
    int next = 0;
    while (next < g->ranks || g->inflight > 0) {
        if (ls_over_time(g, deadline, "schedule checks not answered in time")) {
            ls_drain(g, 5);
            return -1;
        }
        xfer *x;
        while (next < g->ranks && (x = ls_pool_get(g))) {
            snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, next);
            if (ls_xfer_start(g, x, K_CHECK, next, M_GET)) {
                ls_pool_put(g, x);
                ls_drain(g, 5);
                return -1;
            }
            next++;
        }
        ls_step(g, 0.05);
    }
    *secs = ls_now_s() - t0;
    return 0;
}

/* The plan rule of a straggler answer (docs/api.md) as every pipeline's plan into plans[dp] and
 * whether it is a straggler into strag[dp]. */
static int read_pipelines(gen *g, json_t *o, long *plans, int *strag, const char *what)
{
    json_t *r = json_object_get(o, "rule"), *ss = json_object_get(r, "stragglers");
    long long others = ls_json_int(r, "plan_id", -1),
              slow = ls_json_int(r, "straggler_plan_id", -1);
    if (ls_json_phase(o) != PH_RUNNING || !json_is_array(ss) || others < 0 || slow < 0) {
        ls_check_failed(g, "%s: expected a running job and its plan rule: %.200s", what,
                        g->ctl.resp.p);
        return -1;
    }
    for (int d = 0; d < g->dp; d++) {
        plans[d] = (long)others;
        strag[d] = 0;
    }
    for (size_t i = 0; i < json_array_size(ss); i++) {
        json_t *v = json_array_get(ss, i);
        long long d = json_is_integer(v) ? json_integer_value(v) : -1;
        if (d < 0 || d >= g->dp) {
            ls_check_failed(g, "%s: rule.stragglers[%zu] is not a pipeline", what, i);
            return -1;
        }
        plans[d] = (long)slow;
        strag[d] = 1;
    }
    return 0;
}

/* Every pipeline's plan before the straggler (base, base_s), and as the server's last answer
 * gives them (plans, strag). */
typedef struct pipeline_plans {
    long *base, *plans;
    int *base_s, *strag;
} pipeline_plans;

/* Baseline: every rank on its pipeline's plan; with no straggler, the fastest. */
static int check_baseline(gen *g, const status_info *si, strag_figures *sf, pipeline_plans *pp)
{
    double secs;
    for (int d = 0; d < g->dp; d++)
        g->expect_plan[d] = -1;
    if (check_schedules(g, &secs)) return -1;
    if (g->mismatches)
        ls_check_failed(g, "before the straggler: %ld schedules disagree, first %s", g->mismatches,
                        g->first_mismatch);
    for (int d = 0; d < g->dp; d++) {
        pp->base[d] = g->expect_plan[d];
        pp->base_s[d] = g->expect_strag[d];
        if (pp->base[d] != si->fastest_plan || pp->base_s[d])
            ls_check_failed(g,
                            "before the straggler: pipeline %d runs plan %ld%s, expected the "
                            "fastest plan %ld",
                            d, pp->base[d], pp->base_s[d] ? " as a straggler" : "",
                            si->fastest_plan);
    }
    sf->base_plan = pp->base[0];
    return 0;
}

/* The server's answer to the report: pipeline 0 a straggler on its plan, every other pipeline
 * on another plan. */
static void check_set_answer(gen *g, strag_figures *sf, const pipeline_plans *pp)
{
    const long *plans = pp->plans, *base = pp->base;
    const int *strag = pp->strag;
    sf->new_plan = g->dp > 1 ? plans[1] : plans[0];
    for (int d = 0; d < g->dp; d++) {
        if (d == 0 && (!strag[0] || plans[0] != base[0]))
            ls_check_failed(g,
                            "the straggler pipeline 0: plan %ld straggler %s, expected plan %ld "
                            "straggler true",
                            plans[0], strag[0] ? "true" : "false", base[0]);
        if (d > 0 && strag[d]) ls_check_failed(g, "pipeline %d is marked a straggler too", d);
        if (d > 0 && plans[d] != base[d]) sf->switched++;
    }
    if (g->dp > 1 && sf->switched != g->dp - 1)
        ls_check_failed(g, "only %d of %d other pipelines left plan %ld for T' = %.4f s",
                        sf->switched, g->dp - 1, base[1], sf->t_prime);
}

/* Report pipeline 0 slow; the answer and every rank's schedule must show the new plans. */
static int set_straggler(gen *g, const status_info *si, strag_figures *sf, pipeline_plans *pp)
{
    sf->t_prime = si->fastest_time_s * g->slowdown;
    char body[128];
    snprintf(body, sizeof body, "{\"dp\":0,\"time_s\":%.9g}", sf->t_prime);
    json_t *o;
    double srv0 = ls_server_route_s(g, "set_straggler");
    double t = ls_now_s();
    long st = ls_ctl(g, M_POST, body, &o, t + DEADLINE_CHECK_S, "/v1/jobs/%s/stragglers", g->job);
    sf->set_s = ls_now_s() - t;
    double srv1 = ls_server_route_s(g, "set_straggler");
    sf->server_set_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    int bad = read_pipelines(g, o, pp->plans, pp->strag, "POST stragglers");
    json_decref(o);
    if (bad) return -1;
    check_set_answer(g, sf, pp);
    for (int d = 0; d < g->dp; d++) {
        g->expect_plan[d] = pp->plans[d];
        g->expect_strag[d] = pp->strag[d];
    }
    if (check_schedules(g, &sf->check_set_s)) return -1;
    if (g->mismatches)
        ls_check_failed(g,
                        "with the straggler: %ld of %d schedules differ from the server's answer, "
                        "first %s",
                        g->mismatches, g->ranks, g->first_mismatch);
    return 0;
}

/* Clear it: the answer and every rank's schedule back on the baseline plan. */
static int clear_straggler(gen *g, strag_figures *sf, pipeline_plans *pp)
{
    json_t *o;
    double srv0 = ls_server_route_s(g, "clear_straggler");
    double t = ls_now_s();
    long st =
        ls_ctl(g, M_DELETE, NULL, &o, t + DEADLINE_CHECK_S, "/v1/jobs/%s/stragglers/0", g->job);
    sf->clear_s = ls_now_s() - t;
    double srv1 = ls_server_route_s(g, "clear_straggler");
    sf->server_clear_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    int bad = read_pipelines(g, o, pp->plans, pp->strag, "DELETE stragglers/0");
    json_decref(o);
    if (bad) return -1;
    for (int d = 0; d < g->dp; d++)
        if (pp->plans[d] != pp->base[d] || pp->strag[d]) {
            ls_check_failed(g, "after clearing: pipeline %d on plan %ld%s, expected %ld", d,
                            pp->plans[d], pp->strag[d] ? " as a straggler" : "", pp->base[d]);
            break;
        }
    for (int d = 0; d < g->dp; d++) {
        g->expect_plan[d] = pp->base[d];
        g->expect_strag[d] = 0;
    }
    if (check_schedules(g, &sf->check_clear_s)) return -1;
    if (g->mismatches)
        ls_check_failed(g, "after clearing: %ld of %d schedules not back on their plan, first %s",
                        g->mismatches, g->ranks, g->first_mismatch);
    return 0;
}

int ls_run_straggler(gen *g, const status_info *si, strag_figures *sf)
{
    ls_phase_begin(g, "straggler", &g->e_strag);
    pipeline_plans pp;
    pp.base = ls_xcalloc((size_t)g->dp, sizeof *pp.base);
    pp.plans = ls_xcalloc((size_t)g->dp, sizeof *pp.plans);
    pp.base_s = ls_xcalloc((size_t)g->dp, sizeof *pp.base_s);
    pp.strag = ls_xcalloc((size_t)g->dp, sizeof *pp.strag);
    int rc = check_baseline(g, si, sf, &pp) || set_straggler(g, si, sf, &pp) ||
                     clear_straggler(g, sf, &pp)
                 ? -1
                 : 0;
    free(pp.base);
    free(pp.plans);
    free(pp.base_s);
    free(pp.strag);
    return rc;
}
