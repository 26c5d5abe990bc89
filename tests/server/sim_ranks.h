/* Simulated ranks for the server tests: measurements from the GPU model (perseus/gpumodel.h,
 * A100 preset), posted over HTTP as a training job's ranks would post them. Header-only. */
#ifndef PRS_TEST_SIM_RANKS_H
#define PRS_TEST_SIM_RANKS_H

#include "perseus/gpumodel.h"
#include "perseus/planner.h"
#include "server_harness.h"

typedef struct sim_job {
    int port;
    char id[64], token[96];
    int stages, microbatches, dp;
    long acked; /* iterations the server acknowledged */
} sim_job;

/* A job spec that sweeps all 7 clocks from 1410 down to 690 MHz (1 warm-up and 2 measured
 * iterations each, no early stop) with a pinned blocking power. */
static inline json_t *sim_sweep_spec(int stages, int microbatches, int dp)
{
    return json_pack("{s:i, s:i, s:i, s:[i,i,i,i,i,i,i], s:{s:i, s:i, s:b}, s:f}", "stages", stages,
                     "microbatches", microbatches, "dp", dp, "clocks_mhz", 1410, 1290, 1170, 1050,
                     930, 810, 690, "profiling", "warmup_iterations", 1, "iterations_per_clock", 2,
                     "skip_dominated", 0, "blocking_power_w", 83.64);
}

/* POST /v1/jobs with spec (stolen) to the server on port; j gets the job's id and token, and the
 * pipeline's shape as given. Returns the HTTP status. */
static inline int sim_create(int port, json_t *spec, int stages, int microbatches, int dp,
                             sim_job *j)
{
    http_reply r = http_json(port, "POST", "/v1/jobs", NULL, spec);
    *j = (sim_job){port, "", "", stages, microbatches, dp, 0};
    snprintf(j->id, sizeof j->id, "%s", json_str(r.json, "job_id"));
    snprintf(j->token, sizeof j->token, "%s", json_str(r.json, "token"));
    int st = r.status;
    http_reply_free(&r);
    return st;
}

/* Stage multipliers of t_ref: the last stage runs the LM head (gpumodel.h default). */
static inline double sim_imbalance(const sim_job *j, int pp)
{
    return pp == j->stages - 1 ? PRS_SYNTH_LAST_STAGE_DEFAULT : 1.0;
}

static inline double sim_time(const sim_job *j, int pp, prs_instr in, int mhz)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    prs_gpu_work w = g->work[in];
    w.t_ref_s *= sim_imbalance(j, pp);
    return prs_gpu_time_s(g, &w, mhz);
}

static inline double sim_energy(const sim_job *j, int pp, prs_instr in, int mhz)
{
    const prs_gpu_preset *g = prs_gpu_preset_find("a100");
    prs_gpu_work w = g->work[in];
    w.t_ref_s *= sim_imbalance(j, pp);
    return prs_gpu_energy_j(g, &w, mhz);
}

/* One iteration of rank (dp, pp) with every computation at the clocks given (ops entries, in
 * the stage's 1F1B order), windows included when with_windows. time_s overrides the iteration
 * time when > 0. */
static inline json_t *sim_iteration(const sim_job *j, int pp, long iteration, const int *clocks,
                                    int with_windows, double time_s)
{
    prs_pipeline pipe = {j->stages, j->microbatches, PRS_SCHEDULE_1F1B, 0.001, 0, 0, 0};
    int ops = prs_ops_per_stage(&pipe);
    json_t *wins = json_array();
    double t = 0, e = 0;
    for (int i = 0; i < ops; i++) {
        prs_instr in;
        int mb;
        prs_op_describe(&pipe, pp, i, &in, &mb);
        double wt = sim_time(j, pp, in, clocks[i]), we = sim_energy(j, pp, in, clocks[i]);
        t += wt;
        e += we;
        if (with_windows)
            json_array_append_new(wins, json_pack("{s:s, s:i, s:i, s:f, s:f}", "instruction",
                                                  prs_instr_name(in), "microbatch", mb, "clock_mhz",
                                                  clocks[i], "time_s", wt, "energy_j", we));
    }
    json_t *it = json_pack("{s:I, s:f, s:f, s:i}", "iteration", (json_int_t)iteration, "time_s",
                           time_s > 0 ? time_s : t, "energy_j", e, "clock_mhz", clocks[0]);
    if (with_windows)
        json_object_set_new(it, "windows", wins);
    else
        json_decref(wins);
    return it;
}

/* Post one results body; counts acknowledged iterations. Returns the HTTP status. */
static inline int sim_post(sim_job *j, int rank, long round, json_t *iterations /* stolen */)
{
    size_t n = json_array_size(iterations);
    json_t *body = json_pack("{s:i, s:o}", "rank", rank, "iterations", iterations);
    if (round >= 0) json_object_set_new(body, "round", json_integer(round));
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", j->id);
    http_reply r = http_json(j->port, "POST", path, j->token, body);
    int st = r.status;
    if (st == 200) j->acked += (long)n;
    http_reply_free(&r);
    return st;
}

static inline http_reply sim_get(const sim_job *j, const char *what)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s%s", j->id, what);
    return http_do(j->port, "GET", path, j->token, NULL, 0, NULL);
}

/* The job's status (GET /v1/jobs/{id}), or NULL unless it answered 200. */
static inline json_t *sim_status(const sim_job *j)
{
    http_reply r = sim_get(j, "");
    json_t *out = r.status == 200 ? json_incref(r.json) : NULL;
    http_reply_free(&r);
    return out;
}

/* Schedule of a rank; *phase receives the phase name (32 bytes). clocks (ops entries) filled
 * when non-NULL. Returns round, or -1 when the request failed. */
static inline long sim_schedule(const sim_job *j, int rank, char phase[32], int *clocks,
                                long *plan_id, int *iterations_left)
{
    char q[64];
    snprintf(q, sizeof q, "/schedule?rank=%d", rank);
    http_reply r = sim_get(j, q);
    long round = -1;
    if (r.status == 200 && r.json) {
        snprintf(phase, 32, "%s", json_str(r.json, "phase"));
        round = json_int(r.json, "round");
        json_t *c = json_object_get(r.json, "clocks_mhz");
        for (size_t i = 0; clocks && i < json_array_size(c); i++)
            clocks[i] = (int)json_integer_value(json_array_get(c, i));
        if (plan_id) plan_id[0] = json_int(r.json, "plan_id");
        if (iterations_left)
            *iterations_left =
                (int)(json_int(r.json, "iterations") - json_int(r.json, "iterations_reported"));
    }
    http_reply_free(&r);
    return round;
}

/* Register ranks 0..dp*stages-1 (rank = dp * stages + pp). Returns the number of 2xx answers. */
static inline int sim_register_all(sim_job *j)
{
    int ok = 0;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j->id);
    for (int d = 0; d < j->dp; d++)
        for (int p = 0; p < j->stages; p++) {
            http_reply r =
                http_json(j->port, "POST", path, j->token,
                          json_pack("{s:i, s:i, s:i, s:i, s:s}", "rank", d * j->stages + p, "dp", d,
                                    "pp", p, "tp", 0, "gpu", "sim-a100"));
            ok += r.status == 200 || r.status == 201;
            http_reply_free(&r);
        }
    return ok;
}

/* Drive profiling: every rank polls and posts its iterations one at a time until the job
 * leaves profiling, or max_posts posts were made (then returns early: used to crash the server
 * mid-sweep). Returns the number of posts made, -1 on an unexpected answer. */
static inline long sim_profile(sim_job *j, long max_posts, long *iteration)
{
    int ops = 2 * j->microbatches;
    int *clocks = malloc(sizeof(int) * (size_t)ops);
    long posts = 0;
    for (int guard = 0; guard < 10000 && posts < max_posts; guard++) {
        int any = 0;
        for (int rank = 0; rank < j->dp * j->stages && posts < max_posts; rank++) {
            char phase[32] = "";
            int left = 0;
            long round = sim_schedule(j, rank, phase, clocks, NULL, &left);
            if (round < 0) {
                free(clocks);
                return -1;
            }
            if (strcmp(phase, "profiling") != 0) continue;
            any = 1;
            if (left <= 0) continue;
            json_t *its = json_array();
            json_array_append_new(its,
                                  sim_iteration(j, rank % j->stages, (*iteration)++, clocks, 1, 0));
            int st = sim_post(j, rank, round, its);
            posts++;
            if (st != 200) {
                free(clocks);
                return -1;
            }
        }
        if (!any) break;
    }
    free(clocks);
    return posts;
}

/* Poll the job until its phase is not `from` (at most timeout_s). Returns the phase's JSON
 * (new reference) or NULL. */
static inline json_t *sim_wait_phase_change(const sim_job *j, const char *from, double timeout_s)
{
    double t0 = harness_now();
    while (harness_now() - t0 < timeout_s) {
        http_reply r = sim_get(j, "");
        if (r.status == 200 && r.json && strcmp(json_str(r.json, "phase"), from) != 0) {
            json_t *out = json_incref(r.json);
            http_reply_free(&r);
            return out;
        }
        http_reply_free(&r);
        harness_sleep_ms(50); /* poll interval */
    }
    return NULL;
}

#endif
