/* load_server: the job as the server names its phases, and the requests that move it: creation, a
 * profile upload, the wait for a plan, completion. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "load_server.h"

/* ---- job phases as the server names them ---- */

const char *const phase_names[] = {"registering", "profiling", "planning",
                                   "running",     "done",      "failed"};

int ls_phase_index(const char *s)
{
    for (int i = 0; s && i < PH_UNKNOWN; i++)
        if (strcmp(s, phase_names[i]) == 0) return i;
    return PH_UNKNOWN;
}

/* A point in the job's life: later phases, then later rounds, compare greater. */
long long ls_job_key(int phase, long long round)
{
    return (long long)phase * (1LL << 40) + round;
}

int ls_json_phase(json_t *o)
{
    return ls_phase_index(json_string_value(json_object_get(o, "phase")));
}

long long ls_json_int(json_t *o, const char *key, long long dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

/* ---- phases ---- */

int ls_create_job(gen *g)
{
    buf b = {0};
    ls_buf_printf(
        &b, "{\"stages\":%d,\"microbatches\":%d,\"dp\":%d,\"schedule\":\"1f1b\",\"clocks_mhz\":[",
        g->stages, g->microbatches, g->dp);
    for (int i = 0; i < g->nclocks; i++)
        ls_buf_printf(&b, "%s%d", i ? "," : "", g->clocks[i]);
    ls_buf_printf(&b,
                  "],\"profiling\":{\"warmup_iterations\":%d,\"iterations_per_clock\":%d},"
                  "\"blocking_power_w\":%.9g,\"reuse_frontier\":false}",
                  g->warmup, g->iters, g->gpu->blocking_power_w);
    json_t *o;
    long st = ls_ctl(g, M_POST, b.p, &o, ls_now_s() + DEADLINE_CHECK_S, "/v1/jobs");
    free(b.p);
    if (st != 201 || !o) {
        if (st > 0 && st != 201 && st >= 200 && st < 300)
            ls_check_failed(g, "POST /v1/jobs: status %ld, expected 201", st);
        json_decref(o);
        return -1;
    }
    const char *id = json_string_value(json_object_get(o, "job_id"));
    const char *tok = json_string_value(json_object_get(o, "token"));
    if (!id || !tok || strlen(id) >= sizeof g->job || strlen(tok) >= sizeof g->token ||
        ls_json_phase(o) != PH_REGISTERING) {
        ls_check_failed(g, "POST /v1/jobs: unexpected answer %.200s", g->ctl.resp.p);
        json_decref(o);
        return -1;
    }
    snprintf(g->job, sizeof g->job, "%s", id);
    snprintf(g->token, sizeof g->token, "%s", tok);
    json_decref(o);
    char auth[200];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", g->token);
    g->hdr_auth = curl_slist_append(NULL, auth);
    if (!g->hdr_auth) ls_oom();
    g->hdr_auth = curl_slist_append(g->hdr_auth, "Content-Type: application/json");
    g->hdr_auth = curl_slist_append(g->hdr_auth, "Expect:");
    if (!g->hdr_auth) ls_oom();
    return 0;
}

/* --upload-profile: the job's profile from the simulated GPU at the job's clocks (the server
 * refuses rows at other clocks), as the ranks would measure it (window()), uploaded before any
 * rank registers, so the job plans at once and skips profiling. */
int ls_upload_profile(gen *g)
{
    buf b = {0};
    ls_buf_printf(&b, "stage,instruction,frequency,time,energy\n");
    for (int s = 0; s < g->stages; s++)
        for (int c = 0; c < g->nclocks; c++)
            for (int in = 0; in < 2; in++) {
                prs_gpu_work w = g->gpu->work[in];
                if (g->stages > 1 && s == g->stages - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
                ls_buf_printf(&b, "%d,%s,%d,%.9g,%.9g\n", s, prs_instr_name((prs_instr)in),
                              g->clocks[c], prs_gpu_time_s(g->gpu, &w, g->clocks[c]),
                              prs_gpu_energy_j(g->gpu, &w, g->clocks[c]));
            }
    json_t *o;
    long st =
        ls_ctl(g, M_POST, b.p, &o, ls_now_s() + DEADLINE_CHECK_S, "/v1/jobs/%s/profile", g->job);
    free(b.p);
    json_decref(o);
    if (st != 200) {
        ls_check_failed(g, "POST profile: status %ld: %.200s", st, g->ctl.resp.p);
        return -1;
    }
    return 0;
}

int ls_wait_running(gen *g, status_info *si)
{
    ls_phase_begin(g, "planning", &g->e_plan);
    double deadline = ls_now_s() + DEADLINE_PLANNING_S;
    for (;;) {
        json_t *o;
        long st = ls_ctl(g, M_GET, NULL, &o, deadline, "/v1/jobs/%s", g->job);
        if (st != 200 || !o) {
            json_decref(o);
            return -1;
        }
        int ph = ls_json_phase(o);
        if (ph == PH_RUNNING) {
            json_t *pl = json_object_get(o, "planning"), *fr = json_object_get(o, "frontier");
            json_t *fa = json_object_get(fr, "fastest");
            json_t *sec = json_object_get(pl, "elapsed_s"), *ft = json_object_get(fa, "time_s");
            si->planning_s = json_is_number(sec) ? json_number_value(sec) : NAN;
            si->points = (long)ls_json_int(fr, "points", -1);
            si->fastest_plan = (long)ls_json_int(fa, "plan_id", -1);
            si->fastest_time_s = json_is_number(ft) ? json_number_value(ft) : NAN;
            si->measurements = (long)ls_json_int(o, "measurements", -1);
            const char *src = json_string_value(json_object_get(o, "profile_source"));
            snprintf(si->source, sizeof si->source, "%s", src ? src : "?");
            json_decref(o);
            if (!(si->fastest_time_s > 0) || si->fastest_plan < 0 || si->points < 1) {
                ls_check_failed(g, "running, but the status has no fastest plan: %.200s",
                                g->ctl.resp.p);
                return -1;
            }
            return 0;
        }
        if (ph != PH_PLANNING && ph != PH_PROFILING) {
            const char *why = json_string_value(json_object_get(o, "reason"));
            ls_check_failed(g, "the job is %s instead of planning or running%s%s",
                            ph == PH_UNKNOWN ? "in no known phase" : phase_names[ph],
                            why ? ": " : "", why ? why : "");
            json_decref(o);
            return -1;
        }
        json_decref(o);
        double until = ls_now_s() + 0.05;
        while (ls_now_s() < until) {
            if (ls_over_time(g, deadline, "the job is not running after 120 s")) return -1;
            ls_step(g, until - ls_now_s());
        }
    }
}

int ls_complete_job(gen *g)
{
    ls_phase_begin(g, "complete", &g->e_done);
    double deadline = ls_now_s() + DEADLINE_CHECK_S;
    json_t *o;
    long st = ls_ctl(g, M_POST, NULL, &o, deadline, "/v1/jobs/%s/complete", g->job);
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    if (ls_json_phase(o) != PH_DONE) ls_check_failed(g, "complete answered %.200s", g->ctl.resp.p);
    json_decref(o);
    st = ls_ctl(g, M_GET, NULL, &o, deadline, "/v1/jobs/%s", g->job);
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    if (ls_json_phase(o) != PH_DONE) ls_check_failed(g, "the job is not done after complete");
    json_decref(o);
    st = ls_ctl(g, M_GET, NULL, &o, deadline, "/v1/jobs/%s/schedule?rank=0", g->job);
    if (st != 200 || !o) {
        json_decref(o);
        return -1;
    }
    json_t *cl = json_object_get(o, "clocks_mhz");
    if (ls_json_phase(o) != PH_DONE || !json_is_array(cl) || json_array_size(cl) != 0)
        ls_check_failed(g, "a done job's schedule: %.200s", g->ctl.resp.p);
    json_decref(o);
    return 0;
}
