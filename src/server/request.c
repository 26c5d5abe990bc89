/* Strict request-body parsing (request.h), with the field readers of jsonfield.h. Every bound
 * is explicit, so no request can make the server allocate more than its body size allows in
 * proportion. A job spec is decoded by spec.c under the API's limits (req_spec_limits). */
#include "request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/limits.h"
#include "jsonfield.h"

const spec_limits req_spec_limits = {
    .max_model = REQ_MAX_MODEL,
    .max_stages = REQ_MAX_STAGES,
    .max_microbatches = REQ_MAX_MICROBATCHES,
    .max_world = REQ_MAX_WORLD,
    .max_virtual_stages = REQ_MAX_VIRTUAL_STAGES,
    .max_ops = REQ_MAX_OPS,
    .max_clocks = REQ_MAX_CLOCKS,
    .max_clock_mhz = REQ_MAX_CLOCK_MHZ,
    .min_unit_time_s = 1e-6,
    .max_unit_time_s = 10.0,
    .max_blocking_power_w = PRS_MAX_BLOCKING_POWER_W,
    .max_switch_lead_s = 3600.0,
    .max_power_cap_w = REQ_MAX_POWER_CAP_W,
    .max_iterations = REQ_MAX_PROFILING_ITERATIONS,
    .max_straggler_factor = 100.0,
};

int req_parse_job_spec(const char *text, size_t len, job_spec *out, prs_error *err)
{
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    int rc = spec_decode(root, &req_spec_limits, out, err);
    json_decref(root);
    return rc;
}

int req_parse_rank(const char *text, size_t len, req_rank *out, prs_error *err)
{
    static const char *const keys[] = {"rank", "dp", "pp", "tp", "gpu", NULL};
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = jf_only_keys(root, "", keys, err) ||
                     jf_int(root, "rank", 1, 0, REQ_MAX_WORLD - 1, &out->rank, err) ||
                     jf_int(root, "dp", 1, 0, REQ_MAX_WORLD - 1, &out->dp, err) ||
                     jf_int(root, "pp", 1, 0, REQ_MAX_STAGES - 1, &out->pp, err) ||
                     jf_int(root, "tp", 0, 0, REQ_MAX_WORLD - 1, &out->tp, err) ||
                     jf_str(root, "gpu", REQ_MAX_GPU, out->gpu, err)
                 ? PRS_EINVAL
                 : 0;
    json_decref(root);
    return rc;
}

void req_results_free(req_results *r)
{
    if (!r) return;
    free(r->iterations);
    free(r->all_windows);
    r->iterations = NULL;
    r->all_windows = NULL;
    r->niterations = 0;
}

static int parse_window(json_t *w, req_window *out, prs_error *err)
{
    static const char *const keys[] = {"instruction", "chunk",    "microbatch", "clock_mhz",
                                       "time_s",      "energy_j", NULL};
    if (!json_is_object(w)) return jf_fail(err, "expected an object");
    out->chunk = -1;
    out->microbatch = -1;
    if (jf_only_keys(w, "", keys, err) ||
        jf_int(w, "chunk", 0, 0, REQ_MAX_STAGES * 64 - 1, &out->chunk, err) ||
        jf_int(w, "microbatch", 0, 0, REQ_MAX_MICROBATCHES - 1, &out->microbatch, err) ||
        jf_int(w, "clock_mhz", 1, 1, REQ_MAX_CLOCK_MHZ, &out->clock_mhz, err) ||
        jf_real(w, "time_s", 1, 0.0, 1, 1e6, &out->time_s, err) ||
        jf_real(w, "energy_j", 1, 0.0, 1, 1e12, &out->energy_j, err))
        return PRS_EINVAL;
    json_t *in = json_object_get(w, "instruction");
    const char *name = json_is_string(in) ? json_string_value(in) : "";
    if (strcmp(name, "forward") == 0)
        out->instr = PRS_FORWARD;
    else if (strcmp(name, "backward") == 0)
        out->instr = PRS_BACKWARD;
    else
        return jf_fail(err, "instruction: expected \"forward\" or \"backward\"");
    return 0;
}

static int parse_results(json_t *root, req_results *r, prs_error *err)
{
    static const char *const keys[] = {"rank", "round", "iterations", "clock_failures", NULL};
    static const char *const ikeys[] = {"iteration", "time_s",     "energy_j",         "clock_mhz",
                                        "pace_s",    "plan_id",    "blocking_power_w", "wall_s",
                                        "windows",   "fit_rel_se", "fit_criterion",    NULL};
    if (jf_only_keys(root, "", keys, err) ||
        jf_int(root, "rank", 1, 0, REQ_MAX_WORLD - 1, &r->rank, err) ||
        jf_long(root, "round", 0, 0, 1L << 40, &r->round, err) ||
        jf_long(root, "clock_failures", 0, 0, 1L << 40, &r->clock_failures, err))
        return PRS_EINVAL;
    json_t *its = json_object_get(root, "iterations");
    if (!its) return jf_fail(err, "iterations: required");
    size_t n = json_is_array(its) ? json_array_size(its) : 0, nw = 0;
    if (n < 1 || n > REQ_MAX_ITERATIONS)
        return jf_fail(err, "iterations: expected an array of 1..%d iterations",
                       REQ_MAX_ITERATIONS);
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(its, i);
        json_t *ws = json_is_object(it) ? json_object_get(it, "windows") : NULL;
        if (ws && json_is_array(ws)) nw += json_array_size(ws);
    }
    if (nw > REQ_MAX_WINDOWS)
        return jf_fail(err, "iterations: at most %d windows in one post", REQ_MAX_WINDOWS);
    r->iterations = calloc(n, sizeof *r->iterations);
    r->all_windows = calloc(nw ? nw : 1, sizeof *r->all_windows);
    if (!r->iterations || !r->all_windows) return jf_fail(err, "out of memory");
    r->niterations = n;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(its, i);
        req_iteration *ri = &r->iterations[i];
        ri->plan_id = -1;
        prs_error sub;
        if (!json_is_object(it)) return jf_fail(err, "iterations[%zu]: expected an object", i);
        if (jf_only_keys(it, "", ikeys, &sub) ||
            jf_long(it, "iteration", 1, 0, 1L << 40, &ri->iteration, &sub) ||
            jf_real(it, "time_s", 1, 0.0, 1, 1e6, &ri->time_s, &sub) ||
            jf_real(it, "energy_j", 0, 0.0, 0, 1e12, &ri->energy_j, &sub) ||
            jf_int(it, "clock_mhz", 0, 1, REQ_MAX_CLOCK_MHZ, &ri->clock_mhz, &sub) ||
            jf_real(it, "pace_s", 0, 0.0, 1, 1e6, &ri->pace_s, &sub) ||
            jf_long(it, "plan_id", 0, 0, 1L << 40, &ri->plan_id, &sub) ||
            jf_real(it, "blocking_power_w", 0, 0.0, 1, PRS_MAX_BLOCKING_POWER_W,
                    &ri->blocking_power_w, &sub) ||
            jf_real(it, "wall_s", 0, 0.0, 1, 1e6, &ri->wall_s, &sub) ||
            jf_real(it, "fit_rel_se", 0, 0.0, 1, 1e6, &ri->fit_rel_se, &sub) ||
            jf_real(it, "fit_criterion", 0, 0.0, 1, 1, &ri->fit_criterion, &sub))
            return jf_fail(err, "iterations[%zu].%s", i, sub.msg);
        json_t *ws = json_object_get(it, "windows");
        ri->windows = r->all_windows + used;
        if (!ws) continue;
        if (!json_is_array(ws))
            return jf_fail(err, "iterations[%zu].windows: expected an array", i);
        for (size_t j = 0; j < json_array_size(ws); j++) {
            if (parse_window(json_array_get(ws, j), &ri->windows[j], &sub))
                return jf_fail(err, "iterations[%zu].windows[%zu]: %s", i, j, sub.msg);
        }
        ri->nwindows = json_array_size(ws);
        used += ri->nwindows;
    }
    return 0;
}

int req_parse_results(const char *text, size_t len, req_results *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    out->round = -1;
    out->clock_failures = -1;
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    int rc = parse_results(root, out, err);
    json_decref(root);
    if (rc) req_results_free(out);
    return rc;
}

int req_parse_straggler(const char *text, size_t len, req_straggler *out, prs_error *err)
{
    static const char *const keys[] = {"dp", "time_s", "slowdown", NULL};
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = PRS_EINVAL;
    if (jf_only_keys(root, "", keys, err) ||
        jf_int(root, "dp", 1, 0, REQ_MAX_WORLD - 1, &out->dp, err) ||
        jf_real(root, "time_s", 0, 0.0, 1, 1e6, &out->time_s, err) ||
        jf_real(root, "slowdown", 0, 1.0, 1, 100.0, &out->slowdown, err))
        goto out;
    if ((out->time_s > 0) == (out->slowdown > 0)) {
        jf_fail(err, "exactly one of time_s and slowdown is required");
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int req_parse_power_cap(const char *text, size_t len, double *watts, prs_error *err)
{
    static const char *const keys[] = {"power_cap_w", NULL};
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    *watts = 0;
    int rc = jf_only_keys(root, "", keys, err) ||
             jf_real(root, "power_cap_w", 1, 0.0, 1, REQ_MAX_POWER_CAP_W, watts, err);
    json_decref(root);
    return rc ? PRS_EINVAL : 0;
}
