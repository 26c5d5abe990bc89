/* The job spec (spec.h): its decoder, under whichever limits the caller gives (the API's for a
 * request, the capacity for a stored form), its canonical JSON and its stored form. Every field
 * is read with the strict readers of jsonfield.h: unknown keys, wrong types and values out of
 * range are refused with a message naming the field. */
#include "spec.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/limits.h"
#include "jsonfield.h"
#include "prs_assert.h"
#include "secure.h"

/* Length bounds of a spec's reuse_key (printable ASCII): the creator's secret, kept only as its
 * SHA-256 (the key itself never reaches the stored form). */
#define SPEC_MIN_REUSE_KEY 16
#define SPEC_MAX_REUSE_KEY 256

const spec_limits spec_stored_limits = {
    .max_model = SPEC_CAP_MODEL,
    .max_stages = SPEC_CAP_STAGES,
    .max_microbatches = SPEC_CAP_MICROBATCHES,
    .max_world = SPEC_CAP_WORLD,
    .max_virtual_stages = SPEC_CAP_VIRTUAL_STAGES,
    .max_ops = SPEC_CAP_OPS,
    .max_clocks = SPEC_CAP_CLOCKS,
    .max_clock_mhz = 1000000,
    .min_unit_time_s = 1e-6,
    .max_unit_time_s = 3600.0,
    .max_blocking_power_w = PRS_MAX_BLOCKING_POWER_W,
    .max_switch_lead_s = 86400.0,
    .max_power_cap_w = 1e12,
    .max_iterations = 100000,
    .max_straggler_factor = 1e6,
};

static void spec_defaults(job_spec *s)
{
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
}

/* blocking_power_w: optional; null is the same as absent (the canonical form of "measure it"). */
static int get_blocking_power(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    json_t *v = json_object_get(root, "blocking_power_w");
    if (!v || json_is_null(v)) return 0;
    s->has_blocking_power = 1;
    return jf_real(root, "blocking_power_w", 1, 0.0, 0, lim->max_blocking_power_w,
                   &s->blocking_power_w, err);
}

/* power_cap_w: optional; null is the same as absent (no cap). */
static int get_power_cap(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    json_t *v = json_object_get(root, "power_cap_w");
    if (!v || json_is_null(v)) return 0;
    return jf_real(root, "power_cap_w", 1, 0.0, 1, lim->max_power_cap_w, &s->power_cap_w, err);
}

/* reuse_key (the creator's secret, kept only as its SHA-256) or reuse_key_sha256 (that hash, the
 * form the spec is stored in). */
static int get_reuse_key(json_t *root, job_spec *s, prs_error *err)
{
    char key[SPEC_MAX_REUSE_KEY + 1] = "";
    if (jf_str(root, "reuse_key", SPEC_MAX_REUSE_KEY, key, err) ||
        jf_str(root, "reuse_key_sha256", (size_t)2 * SECURE_SHA256_LEN, s->reuse_key_sha256, err))
        return PRS_EINVAL;
    if (json_object_get(root, "reuse_key") && json_object_get(root, "reuse_key_sha256"))
        return jf_fail(err, "reuse_key: give reuse_key or reuse_key_sha256, not both");
    if (json_object_get(root, "reuse_key")) {
        if (strlen(key) < SPEC_MIN_REUSE_KEY)
            return jf_fail(err, "reuse_key: at least %d characters", SPEC_MIN_REUSE_KEY);
        secure_sha256_hex(key, strlen(key), s->reuse_key_sha256);
        return 0;
    }
    const char *x = s->reuse_key_sha256;
    if (x[0] &&
        (strlen(x) != (size_t)2 * SECURE_SHA256_LEN || strspn(x, "0123456789abcdef") != strlen(x)))
        return jf_fail(err, "reuse_key_sha256: expected 64 lowercase hexadecimal digits");
    return 0;
}

/* change_cost_us (optional, microseconds; absent: perseusd's --change-cost-us, default 0):
 * prs_pipeline.change_cost_s. */
static int get_change_cost(json_t *root, job_spec *s, prs_error *err)
{
    s->has_change_cost = json_object_get(root, "change_cost_us") != NULL;
    return jf_real(root, "change_cost_us", 0, 0.0, 0, PRS_MAX_CHANGE_COST_S * 1e6,
                   &s->change_cost_us, err);
}

/* The scalar fields of the top level. */
static int decode_scalars(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    if (jf_str(root, "model", (size_t)lim->max_model, s->model, err) ||
        jf_int(root, "stages", 1, 1, lim->max_stages, &s->stages, err) ||
        jf_int(root, "microbatches", 1, 1, lim->max_microbatches, &s->microbatches, err) ||
        jf_int(root, "dp", 1, 1, lim->max_world, &s->dp, err) ||
        jf_int(root, "tp", 0, 1, lim->max_world, &s->tp, err) ||
        jf_int(root, "virtual_stages", 0, 1, lim->max_virtual_stages, &s->virtual_stages, err) ||
        jf_real(root, "unit_time_s", 0, lim->min_unit_time_s, 0, lim->max_unit_time_s,
                &s->unit_time_s, err) ||
        get_blocking_power(root, lim, s, err) || get_change_cost(root, s, err) ||
        jf_real(root, "switch_lead_s", 0, 0.0, 0, lim->max_switch_lead_s, &s->switch_lead_s, err) ||
        jf_bool(root, "reuse_frontier", &s->reuse_frontier, err) ||
        get_power_cap(root, lim, s, err) || get_reuse_key(root, s, err))
        return PRS_EINVAL;
    json_t *v = json_object_get(root, "schedule");
    if (v && (!json_is_string(v) || prs_schedule_parse(json_string_value(v), &s->schedule)))
        return jf_fail(err, "schedule: expected \"1f1b\", \"gpipe\" or \"interleaved\"");
    v = json_object_get(root, "cost_model");
    if (v && (!json_is_string(v) || prs_cost_model_parse(json_string_value(v), &s->cost_model)))
        return jf_fail(err, "cost_model: expected \"exp\" or \"hull\"");
    return 0;
}

/* The pipeline the scalars make: within the world and computation bounds, and valid. */
static int check_pipeline(const spec_limits *lim, const job_spec *s, prs_error *err)
{
    if ((long)s->dp * s->stages * s->tp > lim->max_world)
        return jf_fail(err, "dp * stages * tp: at most %ld ranks", lim->max_world);
    if (s->schedule == PRS_SCHEDULE_INTERLEAVED) {
        if (s->virtual_stages < 2)
            return jf_fail(err, "virtual_stages: the interleaved schedule needs at least 2");
    } else if (s->virtual_stages != 1) {
        return jf_fail(err, "virtual_stages: only the interleaved schedule has model chunks");
    }
    prs_pipeline pipe;
    spec_pipeline(s, &pipe);
    prs_error perr = {0, ""};
    if (prs_pipeline_check(&pipe, &perr)) return jf_fail(err, "pipeline: %s", perr.msg);
    if ((long)s->stages * prs_ops_per_stage(&pipe) > lim->max_ops)
        return jf_fail(err, "stages * computations per stage: at most %ld", lim->max_ops);
    return 0;
}

int spec_ops_per_stage(const job_spec *s)
{
    prs_pipeline p;
    spec_pipeline(s, &p);
    return prs_ops_per_stage(&p);
}
void spec_pipeline(const job_spec *s, prs_pipeline *pipe)
{
    memset(pipe, 0, sizeof *pipe);
    pipe->stages = s->stages;
    pipe->microbatches = s->microbatches;
    pipe->schedule = s->schedule;
    pipe->unit_time_s = s->unit_time_s;
    pipe->blocking_power_w = s->blocking_power_w;
    pipe->change_cost_s = s->change_cost_us / 1e6;
    pipe->virtual_stages = s->schedule == PRS_SCHEDULE_INTERLEAVED ? s->virtual_stages : 0;
}

int spec_check_profile_clocks(const job_spec *s, const prs_profile *p, prs_error *err)
{
    const prs_profile_row *rows = prs_profile_rows(p);
    for (size_t i = 0; i < prs_profile_nrows(p); i++) {
        int k = 0;
        while (k < s->nclocks && s->clocks_mhz[k] != rows[i].freq_mhz)
            k++;
        if (k < s->nclocks) continue;
        char list[64];
        int n = 0;
        for (int c = 0; c < s->nclocks && n < (int)sizeof list - 12; c++)
            n += snprintf(list + n, sizeof list - (size_t)n, "%s%d", c ? ", " : "",
                          s->clocks_mhz[c]);
        if (n >= (int)sizeof list - 12) snprintf(list + n, sizeof list - (size_t)n, ", ...");
        return prs_error_set(err, PRS_EINVAL,
                             "profile line %d: clock %d MHz (stage %d %s) is not one of the job's "
                             "clocks_mhz (%s)",
                             rows[i].line, rows[i].freq_mhz, rows[i].stage,
                             rows[i].instr == PRS_FORWARD ? "forward" : "backward", list);
    }
    return 0;
}

static int cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* clocks_mhz: required, distinct, kept highest first. */
static int decode_clocks(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    json_t *v = json_object_get(root, "clocks_mhz");
    if (!v) return jf_fail(err, "clocks_mhz: required");
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > (size_t)lim->max_clocks)
        return jf_fail(err, "clocks_mhz: expected an array of 1..%d clocks", lim->max_clocks);
    s->nclocks = (int)json_array_size(v);
    for (int i = 0; i < s->nclocks; i++) {
        json_t *c = json_array_get(v, (size_t)i);
        if (!json_is_integer(c) || json_integer_value(c) < 1 ||
            json_integer_value(c) > lim->max_clock_mhz)
            return jf_fail(err, "clocks_mhz[%d]: expected an integer in 1..%ld", i,
                           lim->max_clock_mhz);
        s->clocks_mhz[i] = (int)json_integer_value(c);
    }
    qsort(s->clocks_mhz, (size_t)s->nclocks, sizeof(int), cmp_desc);
    for (int i = 1; i < s->nclocks; i++)
        if (s->clocks_mhz[i] == s->clocks_mhz[i - 1])
            return jf_fail(err, "clocks_mhz: %d MHz is listed twice", s->clocks_mhz[i]);
    return 0;
}

/* The profiling object (optional), after the clocks (its floor defaults to the lowest). */
static int decode_profiling(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    static const char *const keys[] = {"warmup_iterations",
                                       "iterations_per_clock",
                                       "min_clock_mhz",
                                       "skip_dominated",
                                       "target_se_pct",
                                       "max_iterations_per_clock",
                                       NULL};
    long most = lim->max_iterations;
    PRS_ASSERT(s->nclocks >= 1); /* decode_clocks came first */
    s->min_clock_mhz = s->clocks_mhz[s->nclocks - 1];
    json_t *v = json_object_get(root, "profiling");
    if (v) {
        if (!json_is_object(v)) return jf_fail(err, "profiling: expected an object");
        if (jf_only_keys(v, "profiling", keys, err) ||
            jf_int(v, "warmup_iterations", 0, 0, most, &s->warmup_iterations, err) ||
            jf_int(v, "iterations_per_clock", 0, 1, most, &s->iterations_per_clock, err) ||
            jf_int(v, "min_clock_mhz", 0, 1, lim->max_clock_mhz, &s->min_clock_mhz, err) ||
            jf_bool(v, "skip_dominated", &s->skip_dominated, err) ||
            jf_real(v, "target_se_pct", 0, 0, 0, 100, &s->target_se_pct, err) ||
            jf_int(v, "max_iterations_per_clock", 0, 1, most, &s->max_iterations_per_clock, err))
            return jf_in_object("profiling", err);
    }
    if (!s->max_iterations_per_clock)
        s->max_iterations_per_clock =
            2L * s->iterations_per_clock > most ? (int)most : 2 * s->iterations_per_clock;
    if (s->max_iterations_per_clock < s->iterations_per_clock)
        return jf_fail(err, "profiling.max_iterations_per_clock: below iterations_per_clock");
    if (s->min_clock_mhz > s->clocks_mhz[0])
        return jf_fail(err, "profiling.min_clock_mhz: above every clock in clocks_mhz");
    return 0;
}

/* The straggler object (optional). */
static int decode_straggler(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    static const char *const keys[] = {"factor", "iterations", NULL};
    json_t *v = json_object_get(root, "straggler");
    if (!v) return 0;
    if (!json_is_object(v)) return jf_fail(err, "straggler: expected an object");
    if (jf_only_keys(v, "straggler", keys, err) ||
        jf_real(v, "factor", 0, 1.0, 1, lim->max_straggler_factor, &s->straggler_factor, err) ||
        jf_int(v, "iterations", 0, 1, lim->max_iterations, &s->straggler_iterations, err))
        return jf_in_object("straggler", err);
    return 0;
}

int spec_decode(json_t *root, const spec_limits *lim, job_spec *s, prs_error *err)
{
    static const char *const keys[] = {
        "model",       "stages",      "microbatches",     "dp",
        "tp",          "schedule",    "virtual_stages",   "clocks_mhz",
        "profiling",   "unit_time_s", "blocking_power_w", "change_cost_us",
        "cost_model",  "straggler",   "reuse_frontier",   "switch_lead_s",
        "power_cap_w", "reuse_key",   "reuse_key_sha256", NULL};
    spec_defaults(s);
    if (jf_only_keys(root, "", keys, err) || decode_scalars(root, lim, s, err) ||
        check_pipeline(lim, s, err) || decode_clocks(root, lim, s, err) ||
        decode_profiling(root, lim, s, err) || decode_straggler(root, lim, s, err))
        return PRS_EINVAL;
    return 0;
}

json_t *spec_json(const job_spec *s)
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
    if (o && s->has_change_cost && /* absent when not given: specs of before are unchanged */
        json_object_set_new(o, "change_cost_us", json_real(s->change_cost_us))) {
        json_decref(o);
        return NULL;
    }
    if (o && s->reuse_key_sha256[0] &&
        json_object_set_new(o, "reuse_key_sha256", json_string(s->reuse_key_sha256))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *spec_to_stored(const job_spec *s)
{
    json_t *o = spec_json(s);
    if (!o || json_object_set_new(o, "spec_version", json_integer(SPEC_STORED_VERSION))) {
        json_decref(o);
        return NULL;
    }
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return text;
}

int spec_from_stored(const char *text, size_t len, job_spec *out, prs_error *err)
{
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    long version = 0;
    int rc = jf_long(root, "spec_version", 0, 0, LONG_MAX, &version, err);
    if (!rc && version > SPEC_STORED_VERSION)
        rc = jf_fail(err, "spec_version: %ld, from a newer server (this one reads up to %d)",
                     version, SPEC_STORED_VERSION);
    if (!rc) {
        json_object_del(root, "spec_version");
        rc = spec_decode(root, &spec_stored_limits, out, err);
    }
    json_decref(root);
    return rc;
}
