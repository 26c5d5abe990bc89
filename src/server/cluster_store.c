/* Inference clusters in the store (cluster.h, store.h): each change a client is answered for is
 * committed first — the declaration (as JSON, without its profile), the profile, the latest load
 * report with the periodic levels' state (cluster_levels.c) — and at start every stored cluster
 * is made again from its row: the capacity table rebuilt from the profile, the levels' state
 * loaded (or, without one, the latest load planned), so GET .../desired answers as before the
 * restart. A row that no longer makes a cluster (a profile this version refuses) is logged and
 * left in the store. */
#include <stdlib.h>
#include <string.h>

#include "cluster_store.h"
#include "jsonfield.h"

/* Run fn in one transaction under the store's mutex: 0, or -1 with the store's error in err. */
static int in_tx(prs_server *s, int (*fn)(store *st, void *ud), void *ud, prs_error *err)
{
    pthread_mutex_lock(&s->store_mu);
    int ok = store_begin(s->st) == 0 && fn(s->st, ud) == 0 && store_commit(s->st) == 0;
    if (!ok) {
        prs_error_set(err, PRS_EIO, "storage: %s", store_error(s->st)->msg);
        store_rollback(s->st);
    }
    pthread_mutex_unlock(&s->store_mu);
    return ok ? 0 : -1;
}

static int insert_fn(store *st, void *ud)
{
    return store_insert_cluster(st, ud);
}

int cluster_store_insert(prs_server *s, cluster *c, const char *body, size_t len, prs_error *err)
{
    json_t *o = jf_load(body, len, err);
    if (!o) return -1;
    json_object_del(o, "profile_csv"); /* kept in its own column */
    char *spec = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!spec) return prs_error_set(err, PRS_ENOMEM, "out of memory"), -1;
    pthread_mutex_lock(&c->mu);
    store_cluster_row row = {c->id,
                             c->token_hash,
                             c->created_unix,
                             spec,
                             c->spec.profile_csv,
                             c->spec.profile_len,
                             NULL,
                             0,
                             0};
    int rc = in_tx(s, insert_fn, &row, err);
    pthread_mutex_unlock(&c->mu);
    free(spec);
    return rc;
}

typedef struct profile_args {
    const char *id, *csv;
    size_t len;
} profile_args;

static int profile_fn(store *st, void *ud)
{
    const profile_args *a = ud;
    return store_set_cluster_profile(st, a->id, a->csv, a->len);
}

int cluster_store_profile(prs_server *s, cluster *c, prs_error *err)
{
    pthread_mutex_lock(&c->mu);
    profile_args a = {c->id, c->spec.profile_csv, c->spec.profile_len};
    int rc = in_tx(s, profile_fn, &a, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

typedef struct load_args {
    const char *id, *json;
    long long unix_s;
    long loads;
} load_args;

static int load_fn(store *st, void *ud)
{
    const load_args *a = ud;
    return store_set_cluster_load(st, a->id, a->json, a->unix_s, a->loads);
}

int cluster_store_load(prs_server *s, cluster *c, prs_error *err)
{
    pthread_mutex_lock(&c->mu);
    json_t *r = json_object();
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        if (c->load_rps[k] > 0)
            json_object_set_new(r, prs_infer_class_name(k), json_real(c->load_rps[k]));
    json_t *o = json_pack("{s:o}", "rates_rps", r), *levels = cluster_levels_save(c);
    if (o && levels) json_object_set_new(o, "levels", levels);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int rc = -1;
    if (!text) {
        prs_error_set(err, PRS_ENOMEM, "out of memory");
    } else {
        load_args a = {c->id, text, c->load_unix, c->loads};
        rc = in_tx(s, load_fn, &a, err);
    }
    pthread_mutex_unlock(&c->mu);
    free(text);
    return rc;
}

static int delete_fn(store *st, void *ud)
{
    return store_delete_cluster(st, ud);
}

int cluster_store_delete(prs_server *s, const char *id, prs_error *err)
{
    return in_tx(s, delete_fn, (void *)id, err);
}

/* A stored row, copied out of the store so that the clusters are made without its mutex. */
typedef struct saved_row {
    store_cluster_row row;
    uint8_t hash[32];
    char id[SECURE_ID_LEN + 1];
    char *spec, *profile, *load;
    struct saved_row *next;
} saved_row;

static char *dup_bytes(const char *p, size_t n)
{
    char *q = malloc(n + 1);
    if (q) {
        memcpy(q, p, n);
        q[n] = '\0';
    }
    return q;
}

static int save_row(void *ud, const store_cluster_row *row)
{
    saved_row **list = ud, *r = calloc(1, sizeof *r);
    if (!r) return PRS_ENOMEM;
    r->row = *row;
    memcpy(r->hash, row->token_hash, 32);
    snprintf(r->id, sizeof r->id, "%s", row->id);
    r->spec = dup_bytes(row->spec_json, strlen(row->spec_json));
    r->profile = row->profile ? dup_bytes(row->profile, row->profile_len) : NULL;
    r->load = row->load_json ? dup_bytes(row->load_json, strlen(row->load_json)) : NULL;
    r->row.id = r->id;
    r->row.token_hash = r->hash;
    r->row.spec_json = r->spec;
    r->row.profile = r->profile;
    r->row.load_json = r->load;
    r->next = *list;
    *list = r;
    int lost = !r->spec || (row->profile && !r->profile) || (row->load_json && !r->load);
    return lost ? PRS_ENOMEM : 0;
}

/* One saved row made a cluster again, its latest load planned: 0, or the reason in err. */
static int restore_row(prs_server *s, const store_cluster_row *row, prs_error *err)
{
    cluster_spec *spec = calloc(1, sizeof *spec);
    cluster *c = NULL;
    if (!spec) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = cluster_spec_parse(row->spec_json, strlen(row->spec_json), spec, err);
    if (!rc && row->profile) {
        spec->profile_csv = dup_bytes(row->profile, row->profile_len);
        spec->profile_len = row->profile_len;
        if (!spec->profile_csv) rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    if (!rc)
        rc = cluster_restore(s->clusters, spec, row->token_hash, row->id, row->created_unix, &c,
                             err);
    cluster_spec_free(spec);
    free(spec);
    double rates[PRS_INFER_NCLASS], at;
    prs_error ignored = {0};
    json_t *load =
        !rc && row->load_json ? jf_load(row->load_json, strlen(row->load_json), &ignored) : NULL;
    json_t *levels = load ? json_incref(json_object_get(load, "levels")) : NULL;
    if (load) json_object_del(load, "levels");
    char *rest = load ? json_dumps(load, JSON_COMPACT) : NULL;
    if (rest && cluster_load_parse(rest, strlen(rest), rates, &at, &ignored) == 0)
        cluster_restore_load(c, rates, row->load_unix, row->loads, levels);
    free(rest);
    json_decref(levels);
    json_decref(load);
    if (c) cluster_unpin(s->clusters, c);
    return rc;
}

int cluster_store_restore_all(prs_server *s, prs_error *err)
{
    saved_row *list = NULL;
    pthread_mutex_lock(&s->store_mu);
    int rc = store_each_cluster(s->st, save_row, &list);
    if (rc) prs_error_set(err, PRS_EIO, "loading the clusters: %s", store_error(s->st)->msg);
    pthread_mutex_unlock(&s->store_mu);
    while (list) {
        saved_row *r = list;
        list = r->next;
        prs_error why = {0};
        char q[600];
        if (!rc && restore_row(s, &r->row, &why))
            srv_log(s, PRS_LOG_WARN, "msg=cluster_not_restored cluster=%s error=%s", r->id,
                    srv_kv_quote(why.msg, q, sizeof q));
        free(r->spec);
        free(r->profile);
        free(r->load);
        free(r);
    }
    return rc ? -1 : 0;
}
