/* Reading an inference cluster's declaration and its load reports (cluster.h): strict JSON,
 * every field checked and named in the message when it is wrong, bounded in size (at most
 * CLUSTER_MAX_INST instances of at most CLUSTER_MAX_TP GPUs). */
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "jsonfield.h"

static int class_index(const char *name)
{
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        if (strcmp(name, prs_infer_class_name(k)) == 0) return k;
    return -1;
}

/* "name[i]" of an array member, for messages. */
static int in_item(const char *name, size_t i, prs_error *err)
{
    char where[96];
    snprintf(where, sizeof where, "%s[%zu]", name, i);
    return jf_in_object(where, err);
}

static int parse_gpus(json_t *a, cluster_inst *in, prs_error *err)
{
    if (!json_is_array(a) || json_array_size(a) == 0)
        return jf_fail(err, "gpus: expected a non-empty array of GPU UUIDs");
    if (json_array_size(a) != (size_t)in->tp)
        return jf_fail(err, "gpus: %zu GPUs for tp %d (one UUID per GPU of the instance)",
                       json_array_size(a), in->tp);
    for (size_t g = 0; g < json_array_size(a); g++) {
        json_t *wrap = json_pack("{s:O}", "uuid", json_array_get(a, g));
        int rc = wrap ? jf_str(wrap, "uuid", CLUSTER_UUID_MAX, in->gpu[g], err)
                      : jf_fail(err, "out of memory");
        json_decref(wrap);
        if (!rc && in->gpu[g][0] == '\0') rc = jf_fail(err, "uuid: empty");
        if (rc) return in_item("gpus", g, err);
    }
    return 0;
}

static int parse_inst(json_t *o, int pool, cluster_inst *in, prs_error *err)
{
    static const char *const keys[] = {"url", "gpus", "tp", NULL};
    if (!json_is_object(o)) return jf_fail(err, "expected an object");
    memset(in, 0, sizeof *in);
    in->pool = pool;
    if (jf_only_keys(o, "", keys, err) || jf_int(o, "tp", 1, 1, CLUSTER_MAX_TP, &in->tp, err) ||
        jf_str(o, "url", CLUSTER_URL_MAX, in->url, err))
        return PRS_EINVAL;
    if (strncmp(in->url, "http://", 7) != 0 && strncmp(in->url, "https://", 8) != 0)
        return jf_fail(err, "url: expected an http:// or https:// URL");
    return parse_gpus(json_object_get(o, "gpus"), in, err);
}

static int parse_pool(json_t *o, int pool, cluster_spec *s, prs_error *err)
{
    static const char *const keys[] = {"instances", NULL};
    if (!json_is_object(o)) return jf_fail(err, "expected an object");
    if (jf_only_keys(o, "", keys, err)) return PRS_EINVAL;
    json_t *a = json_object_get(o, "instances");
    if (!a) return 0;
    if (!json_is_array(a)) return jf_fail(err, "instances: expected an array");
    for (size_t i = 0; i < json_array_size(a); i++) {
        if (s->n_inst >= CLUSTER_MAX_INST)
            return jf_fail(err, "instances: more than %d in the cluster", CLUSTER_MAX_INST);
        if (parse_inst(json_array_get(a, i), pool, &s->inst[s->n_inst], err))
            return in_item("instances", i, err);
        s->n_inst++;
    }
    return 0;
}

static int parse_pools(json_t *o, cluster_spec *s, prs_error *err)
{
    if (!o) return jf_fail(err, "pools: required (an object keyed by class: SS .. LL)");
    if (!json_is_object(o)) return jf_fail(err, "pools: expected an object keyed by class");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        int pool = class_index(k);
        char where[80];
        snprintf(where, sizeof where, "pools.%.16s", k);
        if (pool < 0) return jf_fail(err, "%s: unknown class (SS SM SL MS MM ML LS LM LL)", where);
        if (parse_pool(v, pool, s, err)) return jf_in_object(where, err);
    }
    return 0;
}

/* Two numbers of an array field of obj into v (when present). */
static int pair(json_t *obj, const char *key, int n, double *v, double lo, double hi,
                prs_error *err)
{
    json_t *a = json_object_get(obj, key);
    if (!a) return 0;
    if (!json_is_array(a) || json_array_size(a) != (size_t)n)
        return jf_fail(err, "%s: expected an array of %d numbers", key, n);
    for (int i = 0; i < n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        double d = json_is_number(x) ? json_number_value(x) : -1;
        if (!json_is_number(x) || !(d > lo) || d > hi)
            return jf_fail(err, "%s[%d]: expected a number in (%g, %g]", key, i, lo, hi);
        v[i] = d;
    }
    return 0;
}

static int parse_slo(json_t *root, cluster_spec *s, prs_error *err)
{
    static const char *const slo_keys[] = {"ttft_s", "tbt_s", NULL};
    static const char *const cls_keys[] = {"in_tokens", "out_tokens", NULL};
    json_t *slo = json_object_get(root, "slo"), *cls = json_object_get(root, "classes");
    if (slo) {
        if (!json_is_object(slo)) return jf_fail(err, "slo: expected an object");
        if (jf_only_keys(slo, "slo", slo_keys, err) ||
            pair(slo, "ttft_s", 3, s->classes.ttft_slo_s, 0, 3600, err) ||
            jf_real(slo, "tbt_s", 0, 0, 1, 60, &s->classes.tbt_slo_s, err))
            return jf_in_object("slo", err);
    }
    if (cls) {
        double in[2] = {s->classes.in_limit[0], s->classes.in_limit[1]};
        double out[2] = {s->classes.out_limit[0], s->classes.out_limit[1]};
        if (!json_is_object(cls)) return jf_fail(err, "classes: expected an object");
        if (jf_only_keys(cls, "classes", cls_keys, err) ||
            pair(cls, "in_tokens", 2, in, 0, 1e6, err) ||
            pair(cls, "out_tokens", 2, out, 0, 1e6, err))
            return jf_in_object("classes", err);
        if (in[0] >= in[1] || out[0] >= out[1])
            return jf_fail(err, "classes.%s: expected two increasing token limits",
                           in[0] >= in[1] ? "in_tokens" : "out_tokens");
        for (int i = 0; i < 2; i++) {
            s->classes.in_limit[i] = (int)in[i];
            s->classes.out_limit[i] = (int)out[i];
        }
    }
    if (prs_infer_classes_check(&s->classes, err)) return jf_fail(err, "slo/classes: %s", err->msg);
    return 0;
}

/* The levels' periods (online.h): both 0 (plan every report), or a cluster period of whole pool
 * period at least the pool period, and at most PRS_INFER_ONLINE_WINDOWS peak windows. */
static int parse_levels(json_t *root, cluster_spec *s, prs_error *err)
{
    if (jf_real(root, "cluster_period_s", 0, 0, 0, 604800, &s->cluster_period_s, err) ||
        jf_real(root, "pool_period_s", 0, 0, 0, 604800, &s->pool_period_s, err) ||
        jf_real(root, "peak_window_s", 0, 0, 1, 86400, &s->peak_window_s, err) ||
        jf_real(root, "headroom", 0, 1, 0, 10, &s->headroom, err) ||
        jf_real(root, "start_s", 0, 0, 0, 3600, &s->start_s, err) ||
        jf_real(root, "reshard_s", 0, 0, 0, 3600, &s->reshard_s, err) ||
        jf_bool(root, "emergencies", &s->emergencies, err))
        return PRS_EINVAL;
    if ((s->cluster_period_s == 0) != (s->pool_period_s == 0))
        return jf_fail(err, "%s: 0 only with %s 0 (every report planned at once)",
                       s->pool_period_s == 0 ? "pool_period_s" : "cluster_period_s",
                       s->pool_period_s == 0 ? "cluster_period_s" : "pool_period_s");
    if (s->cluster_period_s == 0) return 0;
    prs_infer_opts o;
    prs_infer_opts_default(&o);
    o.cluster_period_s = s->cluster_period_s;
    o.pool_period_s = s->pool_period_s;
    o.peak_window_s = s->peak_window_s;
    if (prs_infer_online_check(&o, err)) return jf_fail(err, "%s", err->msg);
    return 0;
}

static int parse_profile(json_t *root, cluster_spec *s, prs_error *err)
{
    json_t *p = json_object_get(root, "profile_csv");
    if (!p) return 0; /* may come later: POST .../profile */
    if (!json_is_string(p) || json_string_length(p) == 0)
        return jf_fail(err, "profile_csv: expected the profile CSV as a non-empty string");
    s->profile_len = json_string_length(p);
    s->profile_csv = malloc(s->profile_len + 1);
    if (!s->profile_csv) return jf_fail(err, "profile_csv: out of memory");
    memcpy(s->profile_csv, json_string_value(p), s->profile_len + 1);
    return 0;
}

/* Every GPU UUID at most once in the cluster; the budget holds the declared GPUs. */
static int check_gpus(cluster_spec *s, prs_error *err)
{
    int declared = 0;
    for (int i = 0; i < s->n_inst; i++)
        for (int g = 0; g < s->inst[i].tp; g++, declared++)
            for (int j = 0; j <= i; j++)
                for (int h = 0; h < (j == i ? g : s->inst[j].tp); h++)
                    if (strcmp(s->inst[i].gpu[g], s->inst[j].gpu[h]) == 0)
                        return jf_fail(err, "pools.%s: GPU %s is declared twice",
                                       prs_infer_class_name(s->inst[i].pool), s->inst[i].gpu[g]);
    if (s->gpus == 0) s->gpus = declared;
    if (s->gpus < 1) return jf_fail(err, "gpus: required when no instance is declared");
    if (s->gpus < declared)
        return jf_fail(err, "gpus: %d, fewer than the %d GPUs of the declared instances", s->gpus,
                       declared);
    return 0;
}

int cluster_spec_parse(const char *text, size_t len, cluster_spec *s, prs_error *err)
{
    static const char *const keys[] = {"name",
                                       "gpus",
                                       "pools",
                                       "profile_csv",
                                       "slo",
                                       "classes",
                                       "clocks",
                                       "probe_requests",
                                       "max_util",
                                       "cluster_period_s",
                                       "pool_period_s",
                                       "peak_window_s",
                                       "headroom",
                                       "start_s",
                                       "reshard_s",
                                       "emergencies",
                                       NULL};
    memset(s, 0, sizeof *s);
    prs_infer_classes_default(&s->classes);
    s->max_util = 0.8;
    s->probe_requests = 600;
    s->clocks = 6;
    s->cluster_period_s = 1800;
    s->pool_period_s = 300;
    s->peak_window_s = 60;
    s->headroom = 1;
    s->start_s = 30;
    s->reshard_s = 5;
    s->emergencies = 1;
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    int rc = jf_only_keys(root, "", keys, err) ||
             jf_str(root, "name", CLUSTER_NAME_MAX, s->name, err) ||
             jf_int(root, "gpus", 0, 1, CLUSTER_MAX_GPUS, &s->gpus, err) ||
             jf_real(root, "max_util", 0, 0, 1, 1, &s->max_util, err) ||
             jf_int(root, "probe_requests", 0, 20, 100000, &s->probe_requests, err) ||
             jf_int(root, "clocks", 0, 1, PRS_INFER_MAX_CLOCKS, &s->clocks, err) ||
             parse_levels(root, s, err) || parse_slo(root, s, err) ||
             parse_pools(json_object_get(root, "pools"), s, err) || parse_profile(root, s, err) ||
             check_gpus(s, err);
    json_decref(root);
    if (rc) {
        cluster_spec_free(s);
        return PRS_EINVAL;
    }
    return 0;
}

void cluster_spec_free(cluster_spec *s)
{
    free(s->profile_csv);
    s->profile_csv = NULL;
    s->profile_len = 0;
}

int cluster_load_parse(const char *text, size_t len, double *rates_rps, double *at_unix,
                       prs_error *err)
{
    static const char *const keys[] = {"rates_rps", "at_unix", NULL};
    memset(rates_rps, 0, sizeof(double) * PRS_INFER_NCLASS);
    *at_unix = -1;
    json_t *root = jf_load(text, len, err);
    if (!root) return PRS_EINVAL;
    if (json_object_get(root, "at_unix") && jf_real(root, "at_unix", 0, 0, 0, 1e11, at_unix, err)) {
        json_decref(root);
        return PRS_EINVAL;
    }
    json_t *r = json_object_get(root, "rates_rps");
    int rc = jf_only_keys(root, "", keys, err);
    if (!rc && !json_is_object(r))
        rc = jf_fail(err, "rates_rps: required, an object of requests/s by class (SS .. LL)");
    const char *k;
    json_t *v;
    if (!rc) json_object_foreach(r, k, v)
        {
            int c = class_index(k);
            double d = json_is_number(v) ? json_number_value(v) : -1;
            if (c < 0) {
                rc = jf_fail(err, "rates_rps.%.16s: unknown class (SS SM SL MS MM ML LS LM LL)", k);
                break;
            }
            if (!json_is_number(v) || !(d >= 0) || d > 1e6) {
                rc = jf_fail(err, "rates_rps.%s: expected requests/s in [0, 1e6]", k);
                break;
            }
            rates_rps[c] = d;
        }
    json_decref(root);
    return rc ? PRS_EINVAL : 0;
}
