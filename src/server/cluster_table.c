/* The inference clusters a server holds (cluster.h): a fixed table of references, each
 * cluster's capacity table built from its profile, and on every load report the cluster and pool
 * levels: periodic, as the emulator's dynamic policy runs them (online.h), or, with periods of 0,
 * the load planned at once by the project's exact sizing (prs_infer_plan_load, plan.h). The store
 * side: cluster_store.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "profile.h"

struct cluster_table {
    pthread_mutex_t mu;
    cluster *c[CLUSTER_MAX];
};

cluster_table *cluster_table_new(void)
{
    cluster_table *t = calloc(1, sizeof *t);
    if (t) pthread_mutex_init(&t->mu, NULL);
    return t;
}

static void cluster_free(cluster *c)
{
    if (!c) return;
    cluster_spec_free(&c->spec);
    prs_infer_online_free(c->levels);
    free(c->caps);
    free(c->plan);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void cluster_table_free(cluster_table *t)
{
    if (!t) return;
    for (int i = 0; i < CLUSTER_MAX; i++)
        cluster_free(t->c[i]);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* The capacity table of the profile csv for the declaration s: PRS_EINVAL when the profile is
 * bad or lacks the TP of a declared instance. */
static int build_caps(const cluster_spec *s, const char *csv, size_t len, prs_infer_captable *caps,
                      prs_error *err)
{
    prs_infer_profile *p = NULL;
    if (prs_infer_profile_parse(csv, len, "profile", &p, err)) return PRS_EINVAL;
    prs_infer_perf perf;
    prs_infer_profile_perf(p, &perf);
    prs_infer_cap_opts o;
    prs_infer_cap_opts_default(&o);
    o.probe_requests = s->probe_requests;
    o.max_clocks = s->clocks;
    prs_infer_trace none = {0};
    int rc = prs_infer_captable_build(&perf, &s->classes, &o, &none, caps, err);
    prs_infer_profile_free(p);
    if (rc) return prs_error_set(err, PRS_EINVAL, "profile: %s", err->msg);
    for (int i = 0; i < s->n_inst; i++) {
        int found = 0;
        for (int a = 0; a < caps->n_tps; a++)
            found |= caps->tps[a] == s->inst[i].tp;
        if (!found)
            return prs_error_set(err, PRS_EINVAL,
                                 "pools.%s: an instance has tp %d, which the profile does not "
                                 "measure",
                                 prs_infer_class_name(s->inst[i].pool), s->inst[i].tp);
    }
    return 0;
}

static void opts_of(const cluster_spec *s, prs_infer_opts *o)
{
    prs_infer_opts_default(o);
    o->classes = s->classes;
    o->gpus = s->gpus;
    o->max_util = s->max_util;
    if (s->cluster_period_s > 0) { /* 0: no periodic levels (the emulator's defaults kept) */
        o->cluster_period_s = s->cluster_period_s;
        o->pool_period_s = s->pool_period_s;
        o->peak_window_s = s->peak_window_s;
    }
    o->headroom = s->headroom;
    o->start_s = s->start_s;
    o->reshard_s = s->reshard_s;
}

/* The levels afresh for the cluster's capacity table (none without a profile or periods). */
static int levels_new(cluster *c, prs_error *err)
{
    prs_infer_online_free(c->levels);
    c->levels = NULL;
    if (!c->caps || !(c->spec.cluster_period_s > 0)) return 0;
    return prs_infer_online_new(c->caps, &c->opts, c->spec.emergencies, &c->levels, err);
}

int cluster_create(cluster_table *t, cluster_spec *spec, const uint8_t token_hash[], cluster **out,
                   prs_error *err)
{
    return cluster_restore(t, spec, token_hash, NULL, 0, out, err);
}

int cluster_restore(cluster_table *t, cluster_spec *spec, const uint8_t token_hash[],
                    const char *id, long long created_unix, cluster **out, prs_error *err)
{
    *out = NULL;
    cluster *c = calloc(1, sizeof *c);
    if (!c) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->spec = *spec;
    spec->profile_csv = NULL;
    spec->profile_len = 0;
    memcpy(c->token_hash, token_hash, SECURE_SHA256_LEN);
    c->created_unix = created_unix ? created_unix : (long long)time(NULL);
    opts_of(&c->spec, &c->opts);
    int rc = prs_infer_opts_check(&c->opts, err) ? PRS_EINVAL : 0;
    if (!rc && c->spec.profile_csv) {
        c->caps = calloc(1, sizeof *c->caps);
        rc = !c->caps
                 ? prs_error_set(err, PRS_ENOMEM, "out of memory")
                 : build_caps(&c->spec, c->spec.profile_csv, c->spec.profile_len, c->caps, err);
    }
    if (!rc) rc = levels_new(c, err);
    if (!rc && id) snprintf(c->id, sizeof c->id, "%s", id);
    if (!rc && !id) rc = secure_new_id(c->id, err);
    if (rc) {
        cluster_free(c);
        return rc;
    }
    pthread_mutex_lock(&t->mu);
    int slot = -1;
    for (int i = 0; i < CLUSTER_MAX && slot < 0; i++)
        if (!t->c[i]) slot = i;
    if (slot >= 0) {
        t->c[slot] = c;
        c->refs = 2; /* the table's and the caller's */
    }
    pthread_mutex_unlock(&t->mu);
    if (slot < 0) {
        cluster_free(c);
        return prs_error_set(err, PRS_ERANGE, "the server holds %d clusters already", CLUSTER_MAX);
    }
    *out = c;
    return 0;
}

cluster *cluster_pin(cluster_table *t, const char *id)
{
    cluster *found = NULL;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < CLUSTER_MAX && !found; i++)
        if (t->c[i] && strcmp(t->c[i]->id, id) == 0) found = t->c[i];
    if (found) found->refs++;
    pthread_mutex_unlock(&t->mu);
    return found;
}

void cluster_unpin(cluster_table *t, cluster *c)
{
    pthread_mutex_lock(&t->mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (last) cluster_free(c);
}

void cluster_delete(cluster_table *t, cluster *c)
{
    int unlinked = 0;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < CLUSTER_MAX; i++)
        if (t->c[i] == c) {
            t->c[i] = NULL;
            c->deleted = 1;
            unlinked = 1;
        }
    pthread_mutex_unlock(&t->mu);
    if (unlinked) cluster_unpin(t, c); /* the table's reference */
}

cluster **cluster_pin_all(cluster_table *t, size_t *n)
{
    *n = 0;
    cluster **all = calloc(CLUSTER_MAX, sizeof(cluster *));
    if (!all) return NULL;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < CLUSTER_MAX; i++)
        if (t->c[i]) {
            t->c[i]->refs++;
            all[(*n)++] = t->c[i];
        }
    pthread_mutex_unlock(&t->mu);
    return all;
}

/* Plan the latest load (c->mu held): the plan replaces the last on success. */
static int replan_locked(cluster *c, prs_error *err)
{
    if (!c->caps)
        return prs_error_set(err, PRS_EINVAL,
                             "the cluster has no profile yet (POST /v1/clusters/ID/profile)");
    prs_infer_plan *p = calloc(1, sizeof *p);
    if (!p) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = prs_infer_plan_load(c->caps, &c->opts, c->load_rps, p, err);
    if (rc) {
        free(p);
        snprintf(c->last_error, sizeof c->last_error, "%s", err->msg);
        return rc;
    }
    free(c->plan);
    c->plan = p;
    c->generation++;
    c->last_error[0] = '\0';
    return 0;
}

/* Whether two plans hold the same figures (member by member: the structures have padding). */
static int pool_equal(const prs_infer_plan_pool *a, const prs_infer_plan_pool *b)
{
    if (a->load_rps != b->load_rps || a->gpus != b->gpus || a->power_w != b->power_w ||
        a->n_inst != b->n_inst)
        return 0;
    for (int i = 0; i < a->n_inst; i++) {
        const prs_infer_plan_inst *x = &a->inst[i], *y = &b->inst[i];
        if (x->tp != y->tp || x->mhz != y->mhz || x->load_rps != y->load_rps ||
            x->power_w != y->power_w)
            return 0;
    }
    return 1;
}

static int plan_equal(const prs_infer_plan *a, const prs_infer_plan *b)
{
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        if (!pool_equal(&a->pool[k], &b->pool[k])) return 0;
    return a->gpus == b->gpus && a->power_w == b->power_w &&
           a->single_instances == b->single_instances && a->single_gpus == b->single_gpus &&
           a->single_power_w == b->single_power_w;
}

/* The levels' plan in force published as the cluster's (c->mu held): a new generation when it
 * changed. */
static int publish_levels_locked(cluster *c)
{
    const prs_infer_plan *p = &c->levels->plan;
    if (c->plan && plan_equal(c->plan, p)) return 0;
    if (!c->plan) c->plan = malloc(sizeof *c->plan);
    if (!c->plan) return PRS_ENOMEM;
    memcpy(c->plan, p, sizeof *p);
    c->generation++;
    return 0;
}

/* A report to the levels (c->mu held). */
static int report_levels_locked(cluster *c, double now_unix, prs_error *err)
{
    int rc = prs_infer_online_report(c->levels, now_unix, c->load_rps, err);
    if (publish_levels_locked(c) && !rc) rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
    if (rc)
        snprintf(c->last_error, sizeof c->last_error, "%s", err->msg);
    else
        c->last_error[0] = '\0';
    return rc;
}

int cluster_report_load(cluster *c, const double *rates_rps, double now_unix, prs_error *err)
{
    pthread_mutex_lock(&c->mu);
    memcpy(c->load_rps, rates_rps, sizeof c->load_rps);
    c->load_unix = (long long)now_unix;
    c->loads++;
    int rc = c->levels ? report_levels_locked(c, now_unix, err) : replan_locked(c, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void cluster_restore_load(cluster *c, const double *rates_rps, long long load_unix, long loads,
                          json_t *levels)
{
    prs_error ignored = {0};
    pthread_mutex_lock(&c->mu);
    int kept = 0;
    if (c->levels && levels) {
        kept = cluster_levels_load(c, levels, &ignored) == 0;
        if (kept) {
            memcpy(c->load_rps, rates_rps, sizeof c->load_rps);
            c->load_unix = load_unix;
            (void)publish_levels_locked(c);
        } else {
            prs_infer_online_reset(c->levels);
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!kept) (void)cluster_report_load(c, rates_rps, (double)load_unix, &ignored);
    pthread_mutex_lock(&c->mu);
    c->loads = loads;
    pthread_mutex_unlock(&c->mu);
}

int cluster_set_profile(cluster *c, const char *csv, size_t len, prs_error *err)
{
    prs_infer_captable *caps = calloc(1, sizeof *caps);
    char *copy = malloc(len + 1);
    if (!caps || !copy) {
        free(caps);
        free(copy);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    memcpy(copy, csv, len);
    copy[len] = '\0';
    /* The declaration does not change after creation: read without the lock, build outside. */
    int rc = build_caps(&c->spec, copy, len, caps, err);
    if (rc) {
        free(caps);
        free(copy);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    free(c->caps);
    free(c->spec.profile_csv);
    c->caps = caps;
    c->spec.profile_csv = copy;
    c->spec.profile_len = len;
    prs_error ignored = {0};
    /* The levels start afresh on the new table, from the latest load. */
    if (levels_new(c, &ignored)) snprintf(c->last_error, sizeof c->last_error, "%s", ignored.msg);
    if (c->loads > 0 && c->levels)
        (void)report_levels_locked(c, (double)c->load_unix, &ignored);
    else if (c->loads > 0)
        (void)replan_locked(c, &ignored); /* its error stays in last_error */
    pthread_mutex_unlock(&c->mu);
    return 0;
}
