/* Strict request-body parsing (request.h).
 *
 * jansson parses the text (JSON_REJECT_DUPLICATES; its default end-of-input check rejects
 * trailing data); the walkers below then accept exactly the documented shape. Integers must be
 * JSON integers (1.0 is not a rank), reals may be integers or reals but must be finite (jansson
 * never produces NaN or infinity from text; the checks stay for values built in code). Every
 * bound is explicit, so no request can make the server allocate more than its body size allows
 * in proportion. */
#include "request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/limits.h"
#include "secure.h"

/* The one failure path: PRS_EINVAL with a message of at most REQ_MSG_MAX - 1 bytes. */
static int fail(prs_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(prs_error *err, const char *fmt, ...)
{
    char msg[REQ_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, printable: a message may quote a key from the request. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
    return prs_error_set(err, PRS_EINVAL, "%s", msg);
}

static json_t *load(const char *text, size_t len, prs_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        fail(err, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        fail(err, "expected a JSON object");
        return NULL;
    }
    return root;
}

/* Every key of obj must be in allowed (NULL-terminated). */
static int only_keys(json_t *obj, const char *where, const char *const *allowed, prs_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(key, *a) == 0) ok = 1;
        if (!ok) {
            char k[48];
            snprintf(k, sizeof k, "%s", key);
            return fail(err, "%s%sunknown field '%s'", where, *where ? ": " : "", k);
        }
    }
    return 0;
}

/* Integer field: required when req, else *out keeps its default when absent. */
static int get_int(json_t *obj, const char *key, int req, long lo, long hi, long *out,
                   prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return req ? fail(err, "%s: required", key) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return fail(err, "%s: expected an integer in %ld..%ld", key, lo, hi);
    *out = (long)json_integer_value(v);
    return 0;
}

static int get_i(json_t *obj, const char *key, int req, long lo, long hi, int *out, prs_error *err)
{
    long v = *out;
    if (get_int(obj, key, req, lo, hi, &v, err)) return PRS_EINVAL;
    *out = (int)v;
    return 0;
}

/* Real field in [lo, hi] (lo excluded when open_lo). */
static int get_real(json_t *obj, const char *key, int req, double lo, int open_lo, double hi,
                    double *out, prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return req ? fail(err, "%s: required", key) : 0;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || (open_lo ? !(x > lo) : !(x >= lo)) || x > hi)
        return fail(err, "%s: expected a number %s %g and <= %g", key, open_lo ? ">" : ">=", lo,
                    hi);
    *out = x;
    return 0;
}

/* A field of the object `parent` failed: its message names it as parent.field (only_keys'
 * messages already start with the parent). */
static int in_object(const char *parent, prs_error *err)
{
    size_t n = strlen(parent);
    if (strncmp(err->msg, parent, n) == 0) return PRS_EINVAL;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return prs_error_set(err, PRS_EINVAL, "%s.%s", parent, msg);
}

static int get_bool(json_t *obj, const char *key, int *out, prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return fail(err, "%s: expected true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* String of printable ASCII, at most max bytes. */
static int get_str(json_t *obj, const char *key, size_t max, char *out, prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_string(v)) return fail(err, "%s: expected a string", key);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n > max) return fail(err, "%s: longer than %zu bytes", key, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return fail(err, "%s: only printable ASCII is allowed", key);
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* blocking_power_w: optional; null is the same as absent (the canonical form of "measure it"). */
static int get_blocking_power(json_t *root, req_job_spec *s, prs_error *err)
{
    json_t *v = json_object_get(root, "blocking_power_w");
    if (!v || json_is_null(v)) return 0;
    s->has_blocking_power = 1;
    return get_real(root, "blocking_power_w", 1, 0.0, 0, PRS_MAX_BLOCKING_POWER_W,
                    &s->blocking_power_w, err);
}

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

int req_spec_ops_per_stage(const req_job_spec *s)
{
    prs_pipeline p;
    req_spec_pipeline(s, &p);
    return prs_ops_per_stage(&p);
}

void req_spec_pipeline(const req_job_spec *s, prs_pipeline *pipe)
{
    memset(pipe, 0, sizeof *pipe);
    pipe->stages = s->stages;
    pipe->microbatches = s->microbatches;
    pipe->schedule = s->schedule;
    pipe->unit_time_s = s->unit_time_s;
    pipe->blocking_power_w = s->blocking_power_w;
    pipe->virtual_stages = s->schedule == PRS_SCHEDULE_INTERLEAVED ? s->virtual_stages : 0;
}

/* power_cap_w: optional; null is the same as absent (no cap). */
static int get_power_cap(json_t *root, req_job_spec *s, prs_error *err)
{
    json_t *v = json_object_get(root, "power_cap_w");
    if (!v || json_is_null(v)) return 0;
    return get_real(root, "power_cap_w", 1, 0.0, 1, REQ_MAX_POWER_CAP_W, &s->power_cap_w, err);
}

/* reuse_key (the creator's secret, kept only as its SHA-256) or reuse_key_sha256 (that hash, the
 * form the spec is stored in). */
static int get_reuse_key(json_t *root, req_job_spec *s, prs_error *err)
{
    char key[REQ_MAX_REUSE_KEY + 1] = "";
    if (get_str(root, "reuse_key", REQ_MAX_REUSE_KEY, key, err) ||
        get_str(root, "reuse_key_sha256", (size_t)2 * SECURE_SHA256_LEN, s->reuse_key_sha256, err))
        return PRS_EINVAL;
    if (json_object_get(root, "reuse_key") && json_object_get(root, "reuse_key_sha256"))
        return fail(err, "reuse_key: give reuse_key or reuse_key_sha256, not both");
    if (json_object_get(root, "reuse_key")) {
        if (strlen(key) < REQ_MIN_REUSE_KEY)
            return fail(err, "reuse_key: at least %d characters", REQ_MIN_REUSE_KEY);
        secure_sha256_hex(key, strlen(key), s->reuse_key_sha256);
        return 0;
    }
    const char *x = s->reuse_key_sha256;
    if (x[0] &&
        (strlen(x) != (size_t)2 * SECURE_SHA256_LEN || strspn(x, "0123456789abcdef") != strlen(x)))
        return fail(err, "reuse_key_sha256: expected 64 lowercase hexadecimal digits");
    return 0;
}

static int parse_spec(json_t *root, req_job_spec *s, prs_error *err)
{
    static const char *const keys[] = {"model",
                                       "stages",
                                       "microbatches",
                                       "dp",
                                       "tp",
                                       "schedule",
                                       "virtual_stages",
                                       "clocks_mhz",
                                       "profiling",
                                       "unit_time_s",
                                       "blocking_power_w",
                                       "cost_model",
                                       "straggler",
                                       "reuse_frontier",
                                       "switch_lead_s",
                                       "power_cap_w",
                                       "reuse_key",
                                       "reuse_key_sha256",
                                       NULL};
    static const char *const pkeys[] = {"warmup_iterations",
                                        "iterations_per_clock",
                                        "min_clock_mhz",
                                        "skip_dominated",
                                        "target_se_pct",
                                        "max_iterations_per_clock",
                                        NULL};
    static const char *const skeys[] = {"factor", "iterations", NULL};
    memset(s, 0, sizeof *s);
    s->tp = 1;
    s->virtual_stages = 1;
    s->schedule = PRS_SCHEDULE_1F1B;
    s->warmup_iterations = 1;
    s->iterations_per_clock = 3;
    s->target_se_pct = 0.5;
    s->skip_dominated = 1;
    s->unit_time_s = 0.001;
    s->cost_model = PRS_COST_EXP;
    s->straggler_factor = 1.1; /* below the smallest slowdown worth catching (1.2x), not at it */
    s->straggler_iterations = 3;
    s->switch_lead_s = 2.0;
    s->reuse_frontier = 1;
    if (only_keys(root, "", keys, err) || get_str(root, "model", REQ_MAX_MODEL, s->model, err) ||
        get_i(root, "stages", 1, 1, REQ_MAX_STAGES, &s->stages, err) ||
        get_i(root, "microbatches", 1, 1, REQ_MAX_MICROBATCHES, &s->microbatches, err) ||
        get_i(root, "dp", 1, 1, REQ_MAX_WORLD, &s->dp, err) ||
        get_i(root, "tp", 0, 1, REQ_MAX_WORLD, &s->tp, err) ||
        get_i(root, "virtual_stages", 0, 1, 64, &s->virtual_stages, err) ||
        get_real(root, "unit_time_s", 0, 1e-6, 0, 10.0, &s->unit_time_s, err) ||
        get_blocking_power(root, s, err) ||
        get_real(root, "switch_lead_s", 0, 0.0, 0, 3600.0, &s->switch_lead_s, err) ||
        get_bool(root, "reuse_frontier", &s->reuse_frontier, err) || get_power_cap(root, s, err) ||
        get_reuse_key(root, s, err))
        return PRS_EINVAL;
    json_t *v = json_object_get(root, "schedule");
    if (v && (!json_is_string(v) || prs_schedule_parse(json_string_value(v), &s->schedule)))
        return fail(err, "schedule: expected \"1f1b\", \"gpipe\" or \"interleaved\"");
    v = json_object_get(root, "cost_model");
    if (v && (!json_is_string(v) || prs_cost_model_parse(json_string_value(v), &s->cost_model)))
        return fail(err, "cost_model: expected \"exp\" or \"hull\"");
    if ((long)s->dp * s->stages * s->tp > REQ_MAX_WORLD)
        return fail(err, "dp * stages * tp: at most %d ranks", REQ_MAX_WORLD);
    if (s->schedule == PRS_SCHEDULE_INTERLEAVED) {
        if (s->virtual_stages < 2)
            return fail(err, "virtual_stages: the interleaved schedule needs at least 2");
    } else if (s->virtual_stages != 1) {
        return fail(err, "virtual_stages: only the interleaved schedule has model chunks");
    }
    prs_pipeline pipe;
    req_spec_pipeline(s, &pipe);
    prs_error perr = {0, ""};
    if (prs_pipeline_check(&pipe, &perr)) return fail(err, "pipeline: %s", perr.msg);
    if ((long)s->stages * prs_ops_per_stage(&pipe) > REQ_MAX_OPS)
        return fail(err, "stages * computations per stage: at most %d", REQ_MAX_OPS);

    v = json_object_get(root, "clocks_mhz");
    if (!v) return fail(err, "clocks_mhz: required");
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > REQ_MAX_CLOCKS)
        return fail(err, "clocks_mhz: expected an array of 1..%d clocks", REQ_MAX_CLOCKS);
    s->nclocks = (int)json_array_size(v);
    for (int i = 0; i < s->nclocks; i++) {
        json_t *c = json_array_get(v, (size_t)i);
        if (!json_is_integer(c) || json_integer_value(c) < 1 ||
            json_integer_value(c) > REQ_MAX_CLOCK_MHZ)
            return fail(err, "clocks_mhz[%d]: expected an integer in 1..%d", i, REQ_MAX_CLOCK_MHZ);
        s->clocks_mhz[i] = (int)json_integer_value(c);
    }
    qsort(s->clocks_mhz, (size_t)s->nclocks, sizeof(int), cmp_desc);
    for (int i = 1; i < s->nclocks; i++)
        if (s->clocks_mhz[i] == s->clocks_mhz[i - 1])
            return fail(err, "clocks_mhz: %d MHz is listed twice", s->clocks_mhz[i]);

    s->min_clock_mhz = s->clocks_mhz[s->nclocks - 1];
    v = json_object_get(root, "profiling");
    if (v) {
        if (!json_is_object(v)) return fail(err, "profiling: expected an object");
        if (only_keys(v, "profiling", pkeys, err) ||
            get_i(v, "warmup_iterations", 0, 0, 1000, &s->warmup_iterations, err) ||
            get_i(v, "iterations_per_clock", 0, 1, 1000, &s->iterations_per_clock, err) ||
            get_i(v, "min_clock_mhz", 0, 1, REQ_MAX_CLOCK_MHZ, &s->min_clock_mhz, err) ||
            get_bool(v, "skip_dominated", &s->skip_dominated, err) ||
            get_real(v, "target_se_pct", 0, 0, 0, 100, &s->target_se_pct, err) ||
            get_i(v, "max_iterations_per_clock", 0, 1, 1000, &s->max_iterations_per_clock, err))
            return in_object("profiling", err);
    }
    if (!s->max_iterations_per_clock)
        s->max_iterations_per_clock =
            2 * s->iterations_per_clock > 1000 ? 1000 : 2 * s->iterations_per_clock;
    if (s->max_iterations_per_clock < s->iterations_per_clock)
        return fail(err, "profiling.max_iterations_per_clock: below iterations_per_clock");
    if (s->min_clock_mhz > s->clocks_mhz[0])
        return fail(err, "profiling.min_clock_mhz: above every clock in clocks_mhz");
    v = json_object_get(root, "straggler");
    if (v) {
        if (!json_is_object(v)) return fail(err, "straggler: expected an object");
        if (only_keys(v, "straggler", skeys, err) ||
            get_real(v, "factor", 0, 1.0, 1, 100.0, &s->straggler_factor, err) ||
            get_i(v, "iterations", 0, 1, 1000, &s->straggler_iterations, err))
            return in_object("straggler", err);
    }
    return 0;
}

int req_parse_job_spec(const char *text, size_t len, req_job_spec *out, prs_error *err)
{
    json_t *root = load(text, len, err);
    if (!root) return PRS_EINVAL;
    int rc = parse_spec(root, out, err);
    json_decref(root);
    return rc;
}

json_t *req_job_spec_json(const req_job_spec *s)
{
    json_t *clocks = json_array();
    for (int i = 0; clocks && i < s->nclocks; i++)
        if (json_array_append_new(clocks, json_integer(s->clocks_mhz[i]))) {
            json_decref(clocks);
            return NULL;
        }
    if (!clocks) return NULL;
    json_t *bp = s->has_blocking_power ? json_real(s->blocking_power_w) : json_null();
    if (!bp) {
        json_decref(clocks);
        return NULL;
    }
    json_t *cap = s->power_cap_w > 0 ? json_real(s->power_cap_w) : json_null();
    if (!cap) {
        json_decref(clocks);
        json_decref(bp);
        return NULL;
    }
    json_t *o = json_pack(
        "{s:s, s:i, s:i, s:i, s:i, s:s, s:i, s:o, s:{s:i, s:i, s:i, s:b, s:f, s:i}, "
        "s:f, s:o, "
        "s:s, s:{s:f, s:i}, s:f, s:b, s:o}",
        "model", s->model, "stages", s->stages, "microbatches", s->microbatches, "dp", s->dp, "tp",
        s->tp, "schedule", prs_schedule_name(s->schedule), "virtual_stages", s->virtual_stages,
        "clocks_mhz", clocks, "profiling", "warmup_iterations", s->warmup_iterations,
        "iterations_per_clock", s->iterations_per_clock, "min_clock_mhz", s->min_clock_mhz,
        "skip_dominated", s->skip_dominated, "target_se_pct", s->target_se_pct,
        "max_iterations_per_clock", s->max_iterations_per_clock, "unit_time_s", s->unit_time_s,
        "blocking_power_w", bp, "cost_model", prs_cost_model_name(s->cost_model), "straggler",
        "factor", s->straggler_factor, "iterations", s->straggler_iterations, "switch_lead_s",
        s->switch_lead_s, "reuse_frontier", s->reuse_frontier, "power_cap_w", cap);
    if (o && s->reuse_key_sha256[0] &&
        json_object_set_new(o, "reuse_key_sha256", json_string(s->reuse_key_sha256))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int req_parse_rank(const char *text, size_t len, req_rank *out, prs_error *err)
{
    static const char *const keys[] = {"rank", "dp", "pp", "tp", "gpu", NULL};
    json_t *root = load(text, len, err);
    if (!root) return PRS_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = only_keys(root, "", keys, err) ||
                     get_i(root, "rank", 1, 0, REQ_MAX_WORLD - 1, &out->rank, err) ||
                     get_i(root, "dp", 1, 0, REQ_MAX_WORLD - 1, &out->dp, err) ||
                     get_i(root, "pp", 1, 0, REQ_MAX_STAGES - 1, &out->pp, err) ||
                     get_i(root, "tp", 0, 0, REQ_MAX_WORLD - 1, &out->tp, err) ||
                     get_str(root, "gpu", REQ_MAX_GPU, out->gpu, err)
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
    if (!json_is_object(w)) return fail(err, "expected an object");
    out->chunk = -1;
    out->microbatch = -1;
    if (only_keys(w, "", keys, err) ||
        get_i(w, "chunk", 0, 0, REQ_MAX_STAGES * 64 - 1, &out->chunk, err) ||
        get_i(w, "microbatch", 0, 0, REQ_MAX_MICROBATCHES - 1, &out->microbatch, err) ||
        get_i(w, "clock_mhz", 1, 1, REQ_MAX_CLOCK_MHZ, &out->clock_mhz, err) ||
        get_real(w, "time_s", 1, 0.0, 1, 1e6, &out->time_s, err) ||
        get_real(w, "energy_j", 1, 0.0, 1, 1e12, &out->energy_j, err))
        return PRS_EINVAL;
    json_t *in = json_object_get(w, "instruction");
    const char *name = json_is_string(in) ? json_string_value(in) : "";
    if (strcmp(name, "forward") == 0)
        out->instr = PRS_FORWARD;
    else if (strcmp(name, "backward") == 0)
        out->instr = PRS_BACKWARD;
    else
        return fail(err, "instruction: expected \"forward\" or \"backward\"");
    return 0;
}

static int parse_results(json_t *root, req_results *r, prs_error *err)
{
    static const char *const keys[] = {"rank", "round", "iterations", "clock_failures", NULL};
    static const char *const ikeys[] = {"iteration", "time_s",  "energy_j",         "clock_mhz",
                                        "pace_s",    "plan_id", "blocking_power_w", "wall_s",
                                        "windows",   NULL};
    if (only_keys(root, "", keys, err) ||
        get_i(root, "rank", 1, 0, REQ_MAX_WORLD - 1, &r->rank, err) ||
        get_int(root, "round", 0, 0, 1L << 40, &r->round, err) ||
        get_int(root, "clock_failures", 0, 0, 1L << 40, &r->clock_failures, err))
        return PRS_EINVAL;
    json_t *its = json_object_get(root, "iterations");
    if (!its) return fail(err, "iterations: required");
    size_t n = json_is_array(its) ? json_array_size(its) : 0, nw = 0;
    if (n < 1 || n > REQ_MAX_ITERATIONS)
        return fail(err, "iterations: expected an array of 1..%d iterations", REQ_MAX_ITERATIONS);
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(its, i);
        json_t *ws = json_is_object(it) ? json_object_get(it, "windows") : NULL;
        if (ws && json_is_array(ws)) nw += json_array_size(ws);
    }
    if (nw > REQ_MAX_WINDOWS)
        return fail(err, "iterations: at most %d windows in one post", REQ_MAX_WINDOWS);
    r->iterations = calloc(n, sizeof *r->iterations);
    r->all_windows = calloc(nw ? nw : 1, sizeof *r->all_windows);
    if (!r->iterations || !r->all_windows) return fail(err, "out of memory");
    r->niterations = n;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(its, i);
        req_iteration *ri = &r->iterations[i];
        ri->plan_id = -1;
        prs_error sub;
        if (!json_is_object(it)) return fail(err, "iterations[%zu]: expected an object", i);
        if (only_keys(it, "", ikeys, &sub) ||
            get_int(it, "iteration", 1, 0, 1L << 40, &ri->iteration, &sub) ||
            get_real(it, "time_s", 1, 0.0, 1, 1e6, &ri->time_s, &sub) ||
            get_real(it, "energy_j", 0, 0.0, 0, 1e12, &ri->energy_j, &sub) ||
            get_i(it, "clock_mhz", 0, 1, REQ_MAX_CLOCK_MHZ, &ri->clock_mhz, &sub) ||
            get_real(it, "pace_s", 0, 0.0, 1, 1e6, &ri->pace_s, &sub) ||
            get_int(it, "plan_id", 0, 0, 1L << 40, &ri->plan_id, &sub) ||
            get_real(it, "blocking_power_w", 0, 0.0, 1, PRS_MAX_BLOCKING_POWER_W,
                     &ri->blocking_power_w, &sub) ||
            get_real(it, "wall_s", 0, 0.0, 1, 1e6, &ri->wall_s, &sub))
            return fail(err, "iterations[%zu].%s", i, sub.msg);
        json_t *ws = json_object_get(it, "windows");
        ri->windows = r->all_windows + used;
        if (!ws) continue;
        if (!json_is_array(ws)) return fail(err, "iterations[%zu].windows: expected an array", i);
        for (size_t j = 0; j < json_array_size(ws); j++) {
            if (parse_window(json_array_get(ws, j), &ri->windows[j], &sub))
                return fail(err, "iterations[%zu].windows[%zu]: %s", i, j, sub.msg);
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
    json_t *root = load(text, len, err);
    if (!root) return PRS_EINVAL;
    int rc = parse_results(root, out, err);
    json_decref(root);
    if (rc) req_results_free(out);
    return rc;
}

int req_parse_straggler(const char *text, size_t len, req_straggler *out, prs_error *err)
{
    static const char *const keys[] = {"dp", "time_s", "slowdown", NULL};
    json_t *root = load(text, len, err);
    if (!root) return PRS_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = PRS_EINVAL;
    if (only_keys(root, "", keys, err) ||
        get_i(root, "dp", 1, 0, REQ_MAX_WORLD - 1, &out->dp, err) ||
        get_real(root, "time_s", 0, 0.0, 1, 1e6, &out->time_s, err) ||
        get_real(root, "slowdown", 0, 1.0, 1, 100.0, &out->slowdown, err))
        goto out;
    if ((out->time_s > 0) == (out->slowdown > 0)) {
        fail(err, "exactly one of time_s and slowdown is required");
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
    json_t *root = load(text, len, err);
    if (!root) return PRS_EINVAL;
    *watts = 0;
    int rc = only_keys(root, "", keys, err) ||
             get_real(root, "power_cap_w", 1, 0.0, 1, REQ_MAX_POWER_CAP_W, watts, err);
    json_decref(root);
    return rc ? PRS_EINVAL : 0;
}
