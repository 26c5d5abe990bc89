/* Reading the router's JSON configuration (router_config.h). Every field is checked with the
 * path of the field in the message; unknown keys are refused, so a typo never silently falls
 * back to a default. */
#include "router_config.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "readfile.h"

static int check_keys(const json_t *obj, const char *const *known, const char *where,
                      prs_error *err)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        int ok = 0;
        for (const char *const *k = known; *k; k++)
            ok |= strcmp(*k, key) == 0;
        if (!ok) return prs_error_set(err, PRS_EINVAL, "%s: unknown key '%s'", where, key);
    }
    return 0;
}

static int get_name(const json_t *obj, const char *key, char *out, size_t max, const char *where,
                    prs_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= max)
        return prs_error_set(err, PRS_EINVAL, "%s.%s must be a string of 1 to %zu bytes", where,
                             key, max - 1);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* An optional integer in [lo, hi]; *out keeps its default when the key is absent. */
static int get_int(const json_t *obj, const char *key, long lo, long hi, long *out,
                   const char *where, prs_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return prs_error_set(err, PRS_EINVAL, "%s.%s must be an integer from %ld to %ld", where,
                             key, lo, hi);
    *out = (long)json_integer_value(v);
    return 0;
}

static int parse_instance(const json_t *j, prs_router_config *c, int pool, const char *where,
                          prs_error *err)
{
    static const char *const keys[] = {"name", "url", "tp", "mhz", "max_running", NULL};
    if (!json_is_object(j)) return prs_error_set(err, PRS_EINVAL, "%s must be an object", where);
    prs_router_instance *in = &c->inst[c->ninst];
    const prs_infer_gpu *g = c->cost.gpu;
    long tp = 0, mhz = g->f_max_mhz, max_running = PRS_INFER_MAX_SEQS;
    int rc = check_keys(j, keys, where, err);
    if (!rc) rc = get_name(j, "name", in->name, sizeof in->name, where, err);
    if (!rc) rc = get_name(j, "url", in->url, sizeof in->url, where, err);
    if (!rc && strncmp(in->url, "http://", 7) != 0)
        rc = prs_error_set(err, PRS_EINVAL, "%s.url must start with http://", where);
    if (!rc && json_object_get(j, "tp") == NULL)
        rc = prs_error_set(err, PRS_EINVAL, "%s.tp is required", where);
    if (!rc) rc = get_int(j, "tp", 1, 64, &tp, where, err);
    if (!rc) rc = get_int(j, "mhz", g->f_min_mhz, g->f_max_mhz, &mhz, where, err);
    if (!rc) rc = get_int(j, "max_running", 1, 100000, &max_running, where, err);
    long kv;
    prs_error kv_err = {0};
    if (!rc && prs_infer_roofline_kv_tokens(&c->cost, (int)tp, &kv, &kv_err) != 0)
        rc = prs_error_set(err, PRS_EINVAL, "%s.tp: %s", where, kv_err.msg);
    if (rc) return rc;
    size_t n = strlen(in->url);
    while (n > 7 && in->url[n - 1] == '/')
        in->url[--n] = '\0';
    for (int i = 0; i < c->ninst; i++)
        if (strcmp(c->inst[i].name, in->name) == 0)
            return prs_error_set(err, PRS_EINVAL, "%s.name '%s' is used twice", where, in->name);
    in->tp = (int)tp;
    in->mhz = (int)mhz;
    in->max_running = (int)max_running;
    in->pool = pool;
    c->ninst++;
    return 0;
}

static int parse_classes_of_pool(const json_t *a, prs_router_config *c, int pool, const char *where,
                                 prs_error *err)
{
    if (!json_is_array(a) || json_array_size(a) == 0)
        return prs_error_set(err, PRS_EINVAL, "%s.classes must be a non-empty array", where);
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        int k = -1;
        for (int q = 0; q < PRS_INFER_NCLASS && json_is_string(v); q++)
            if (strcmp(prs_infer_class_name(q), json_string_value(v)) == 0) k = q;
        if (k < 0)
            return prs_error_set(err, PRS_EINVAL,
                                 "%s.classes[%zu] must be a class name, SS SM SL MS MM ML LS LM "
                                 "or LL",
                                 where, i);
        if (c->pool_of_class[k] >= 0)
            return prs_error_set(err, PRS_EINVAL, "%s.classes: class %s is already in pool '%s'",
                                 where, json_string_value(v), c->pools[c->pool_of_class[k]].name);
        c->pool_of_class[k] = pool;
    }
    return 0;
}

static int parse_pool(const json_t *j, prs_router_config *c, const char *where, prs_error *err)
{
    static const char *const keys[] = {"name", "classes", "instances", NULL};
    if (!json_is_object(j)) return prs_error_set(err, PRS_EINVAL, "%s must be an object", where);
    int p = c->npools;
    prs_router_pool *pool = &c->pools[p];
    int rc = check_keys(j, keys, where, err);
    if (!rc) rc = get_name(j, "name", pool->name, sizeof pool->name, where, err);
    if (!rc) rc = parse_classes_of_pool(json_object_get(j, "classes"), c, p, where, err);
    if (rc) return rc;
    const json_t *a = json_object_get(j, "instances");
    if (!json_is_array(a) || json_array_size(a) == 0)
        return prs_error_set(err, PRS_EINVAL, "%s.instances must be a non-empty array", where);
    pool->first = c->ninst;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        char w[128];
        snprintf(w, sizeof w, "%s.instances[%zu]", where, i);
        if (c->ninst == PRS_ROUTER_MAX_INSTANCES)
            return prs_error_set(err, PRS_EINVAL, "%s: more than %d instances", w,
                                 PRS_ROUTER_MAX_INSTANCES);
        rc = parse_instance(v, c, p, w, err);
        if (rc) return rc;
    }
    pool->n = c->ninst - pool->first;
    c->npools++;
    return 0;
}

static int parse_cost(const json_t *root, prs_router_config *c, prs_error *err)
{
    const json_t *cm = json_object_get(root, "cost_model");
    const json_t *m = json_object_get(cm, "model"), *g = json_object_get(cm, "gpu");
    if (!json_is_object(cm) || !json_is_string(m) || !json_is_string(g))
        return prs_error_set(err, PRS_EINVAL,
                             "cost_model must be an object with strings \"model\" and \"gpu\"");
    const prs_infer_llm *llm = prs_infer_llm_find(json_string_value(m));
    const prs_infer_gpu *gpu = prs_infer_gpu_find(json_string_value(g));
    char names[256];
    if (llm == NULL)
        return prs_error_set(err, PRS_EINVAL, "cost_model.model '%s' is unknown (known: %s)",
                             json_string_value(m), prs_infer_llm_names(names, sizeof names));
    if (gpu == NULL)
        return prs_error_set(err, PRS_EINVAL, "cost_model.gpu '%s' is unknown (known: %s)",
                             json_string_value(g), prs_infer_gpu_names(names, sizeof names));
    return prs_infer_roofline_init(&c->cost, llm, gpu, err);
}

static int parse_limits(const json_t *root, prs_router_config *c, prs_error *err)
{
    long body = (long)c->max_body_bytes, conns = c->max_connections, out = c->default_out_tokens;
    long timeout = (long)c->backend_timeout_s, client_timeout = (long)c->client_timeout_s;
    int rc = get_int(root, "max_body_bytes", 1024, 1L << 30, &body, "config", err);
    if (!rc) rc = get_int(root, "max_connections", 1, 100000, &conns, "config", err);
    if (!rc) rc = get_int(root, "default_max_tokens", 1, PRS_OAI_MAX_TOKENS, &out, "config", err);
    if (!rc) rc = get_int(root, "backend_timeout_s", 1, 86400, &timeout, "config", err);
    if (!rc) rc = get_int(root, "client_timeout_s", 1, 86400, &client_timeout, "config", err);
    const json_t *cl = json_object_get(root, "classes");
    if (!rc && cl != NULL) {
        const json_t *in = json_object_get(cl, "input"), *o = json_object_get(cl, "output");
        if (!json_is_object(cl) ||
            json_unpack((json_t *)in, "[ii]", &c->classes.in_limit[0], &c->classes.in_limit[1]) !=
                0 ||
            json_unpack((json_t *)o, "[ii]", &c->classes.out_limit[0], &c->classes.out_limit[1]))
            rc = prs_error_set(err, PRS_EINVAL,
                               "classes must be {\"input\": [A, B], \"output\": [C, D]}");
        else
            rc = prs_infer_classes_check(&c->classes, err);
    }
    c->max_body_bytes = (size_t)body;
    c->max_connections = (unsigned)conns;
    c->default_out_tokens = out;
    c->backend_timeout_s = (double)timeout;
    c->client_timeout_s = (double)client_timeout;
    return rc;
}

/* An optional number in [lo, hi]; *out keeps its default when the key is absent. */
static int get_num(const json_t *obj, const char *key, double lo, double hi, double *out,
                   const char *where, prs_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (v == NULL) return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi)
        return prs_error_set(err, PRS_EINVAL, "%s.%s must be a number from %g to %g", where, key,
                             lo, hi);
    *out = json_number_value(v);
    return 0;
}

/* "perseusd": {"url", "cluster", "token" or "token_file", "period_s", "rate_scale"}. */
static int parse_report(const json_t *root, prs_router_report *r, prs_error *err)
{
    static const char *const keys[] = {"url",      "cluster",    "token", "token_file",
                                       "period_s", "rate_scale", NULL};
    const json_t *j = json_object_get(root, "perseusd");
    r->period_s = 30;
    r->rate_scale = 1;
    if (j == NULL) return 0;
    if (!json_is_object(j)) return prs_error_set(err, PRS_EINVAL, "perseusd must be an object");
    int rc = check_keys(j, keys, "perseusd", err);
    if (!rc) rc = get_name(j, "url", r->url, sizeof r->url, "perseusd", err);
    if (!rc && strncmp(r->url, "http://", 7) != 0 && strncmp(r->url, "https://", 8) != 0)
        rc = prs_error_set(err, PRS_EINVAL, "perseusd.url must start with http:// or https://");
    if (!rc) rc = get_name(j, "cluster", r->cluster, sizeof r->cluster, "perseusd", err);
    if (!rc && strspn(r->cluster, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789-_") != strlen(r->cluster))
        rc = prs_error_set(err, PRS_EINVAL, "perseusd.cluster must be a cluster id");
    const json_t *file = json_object_get(j, "token_file");
    if (!rc && (file != NULL) == (json_object_get(j, "token") != NULL))
        rc = prs_error_set(err, PRS_EINVAL, "perseusd: give one of token and token_file");
    if (!rc && file == NULL) rc = get_name(j, "token", r->token, sizeof r->token, "perseusd", err);
    if (!rc && file != NULL) {
        char path[PRS_ROUTER_URL_MAX], *text = NULL;
        size_t len = 0;
        rc = get_name(j, "token_file", path, sizeof path, "perseusd", err);
        if (!rc && (rc = prs__read_bounded(path, sizeof r->token - 1, "255 bytes", &text, &len,
                                           err)) != 0) {
            char msg[PRS_ERRMSG_MAX];
            snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
            prs_error_set(err, rc, "perseusd.token_file: %s", msg);
        }
        while (!rc && len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
            len--;
        if (!rc && len == 0) rc = prs_error_set(err, PRS_EINVAL, "perseusd.token_file is empty");
        if (!rc) memcpy(r->token, text, len);
        free(text);
    }
    if (!rc && strpbrk(r->token, "\r\n") != NULL)
        rc = prs_error_set(err, PRS_EINVAL, "perseusd.token holds a line break");
    if (!rc) rc = get_num(j, "period_s", 0.01, 86400, &r->period_s, "perseusd", err);
    if (!rc) rc = get_num(j, "rate_scale", 1e-6, 1e6, &r->rate_scale, "perseusd", err);
    return rc;
}

static int parse_root(const json_t *root, prs_router_config *c, prs_error *err)
{
    static const char *const keys[] = {"model",
                                       "cost_model",
                                       "classes",
                                       "pools",
                                       "max_body_bytes",
                                       "max_connections",
                                       "default_max_tokens",
                                       "backend_timeout_s",
                                       "client_timeout_s",
                                       "perseusd",
                                       NULL};
    if (!json_is_object(root))
        return prs_error_set(err, PRS_EINVAL, "the configuration must be a JSON object");
    int rc = check_keys(root, keys, "config", err);
    if (!rc) rc = get_name(root, "model", c->model, sizeof c->model, "config", err);
    if (!rc) rc = parse_cost(root, c, err);
    if (!rc) rc = parse_limits(root, c, err);
    if (!rc) rc = parse_report(root, &c->report, err);
    if (rc) return rc;
    const json_t *pools = json_object_get(root, "pools");
    if (!json_is_array(pools) || json_array_size(pools) == 0 ||
        json_array_size(pools) > PRS_ROUTER_MAX_POOLS)
        return prs_error_set(err, PRS_EINVAL, "pools must be an array of 1 to %d pools",
                             PRS_ROUTER_MAX_POOLS);
    c->inst = calloc(PRS_ROUTER_MAX_INSTANCES, sizeof *c->inst);
    if (c->inst == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    size_t i;
    const json_t *v;
    json_array_foreach(pools, i, v)
    {
        char w[32];
        snprintf(w, sizeof w, "pools[%zu]", i);
        rc = parse_pool(v, c, w, err);
        if (rc) return rc;
    }
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        if (c->pool_of_class[k] < 0)
            return prs_error_set(err, PRS_EINVAL, "class %s is in no pool",
                                 prs_infer_class_name(k));
    return 0;
}

int prs__router_config_parse(const char *text, size_t len, const char *name, prs_router_config *out,
                             prs_error *err)
{
    memset(out, 0, sizeof *out);
    prs_infer_classes_default(&out->classes);
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        out->pool_of_class[k] = -1;
    out->default_out_tokens = 128;
    out->max_body_bytes = 1u << 20;
    out->max_connections = 1024;
    out->backend_timeout_s = 600;
    out->client_timeout_s = 600;
    out->down_s = 1.0;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        prs__oai_one_line(jerr.text);
        return prs_error_set(err, PRS_EPARSE, "%s:%d: %s", name ? name : "<memory>", jerr.line,
                             jerr.text);
    }
    int rc = parse_root(root, out, err);
    json_decref(root);
    if (rc) {
        char msg[PRS_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        prs__oai_one_line(msg); /* names from the file may hold control characters */
        prs_error_set(err, rc, "%s: %s", name ? name : "<memory>", msg);
        prs__router_config_free(out);
    }
    return rc;
}

int prs__router_config_load(const char *path, prs_router_config *out, prs_error *err)
{
    char *text;
    size_t len;
    memset(out, 0, sizeof *out);
    int rc = prs__read_bounded(path, PRS_ROUTER_CONFIG_MAX_BYTES, "PRS_ROUTER_CONFIG_MAX_BYTES",
                               &text, &len, err);
    if (rc) return rc;
    rc = prs__router_config_parse(text, len, path, out, err);
    free(text);
    return rc;
}

void prs__router_config_free(prs_router_config *c)
{
    free(c->inst);
    c->inst = NULL;
    c->ninst = 0;
}
