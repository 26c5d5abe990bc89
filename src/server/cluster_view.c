/* What an inference cluster shows (cluster.h): its state and its desired configuration as JSON,
 * and its Prometheus series, the ones an autoscaler follows. Every view is read under the
 * cluster's mutex. Instances are counted per pool and TP degree: the declared ones (what runs)
 * and the desired ones (what the cluster level chose for the latest load). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* TP degrees shown: the profile's, else the declared instances'. */
static int tps_of(const cluster *c, int *tps)
{
    int n = 0;
    if (c->caps) {
        for (int a = 0; a < c->caps->n_tps; a++)
            tps[n++] = c->caps->tps[a];
        return n;
    }
    for (int i = 0; i < c->spec.n_inst; i++) {
        int seen = 0;
        for (int a = 0; a < n; a++)
            seen |= tps[a] == c->spec.inst[i].tp;
        if (!seen && n < CLUSTER_MAX_TP) tps[n++] = c->spec.inst[i].tp;
    }
    return n;
}

static int declared(const cluster *c, int pool, int tp)
{
    int n = 0;
    for (int i = 0; i < c->spec.n_inst; i++)
        n += c->spec.inst[i].pool == pool && c->spec.inst[i].tp == tp;
    return n;
}

static int desired(const cluster *c, int pool, int tp)
{
    if (!c->plan) return declared(c, pool, tp); /* no load yet: keep what runs */
    int n = 0;
    const prs_infer_plan_pool *p = &c->plan->pool[pool];
    for (int i = 0; i < p->n_inst; i++)
        n += p->inst[i].tp == tp;
    return n;
}

static json_t *real(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *pool_json(const cluster *c, int k, const int *tps, int ntp)
{
    json_t *o = json_object(), *want = json_array(), *have = json_array();
    int gpus = 0;
    for (int a = 0; a < ntp; a++) {
        int d = desired(c, k, tps[a]);
        gpus += d * tps[a];
        json_array_append_new(want, json_pack("{s:i, s:i}", "tp", tps[a], "count", d));
        json_array_append_new(
            have, json_pack("{s:i, s:i}", "tp", tps[a], "count", declared(c, k, tps[a])));
    }
    json_object_set_new(o, "load_rps", real(c->load_rps[k]));
    json_object_set_new(o, "gpus", json_integer(gpus));
    json_object_set_new(o, "instances", want);
    json_object_set_new(o, "declared", have);
    if (c->plan) {
        json_t *cl = json_array();
        const prs_infer_plan_pool *p = &c->plan->pool[k];
        for (int i = 0; i < p->n_inst; i++)
            json_array_append_new(cl,
                                  json_pack("{s:i, s:i, s:o}", "tp", p->inst[i].tp, "freq_mhz",
                                            p->inst[i].mhz, "load_rps", real(p->inst[i].load_rps)));
        json_object_set_new(o, "planned", cl);
        json_object_set_new(o, "power_w", real(p->power_w));
    }
    json_t *lv = cluster_levels_pool_view(c, k);
    if (lv) json_object_set_new(o, "level", lv);
    return o;
}

static json_t *desired_locked(const cluster *c)
{
    int tps[CLUSTER_MAX_TP];
    int ntp = tps_of(c, tps);
    json_t *o = json_object(), *pools = json_object();
    json_object_set_new(o, "cluster_id", json_string(c->id));
    json_object_set_new(o, "generation", json_integer(c->generation));
    json_object_set_new(o, "gpus", json_integer(c->spec.gpus));
    json_object_set_new(o, "gpus_used", json_integer(c->plan ? c->plan->gpus : 0));
    json_object_set_new(o, "power_w", c->plan ? real(c->plan->power_w) : json_null());
    json_object_set_new(o, "load_unix", json_integer(c->load_unix));
    json_object_set_new(o, "last_error",
                        c->last_error[0] ? json_string(c->last_error) : json_null());
    for (int k = 0; k < PRS_INFER_NCLASS; k++)
        json_object_set_new(pools, prs_infer_class_name(k), pool_json(c, k, tps, ntp));
    json_object_set_new(o, "pools", pools);
    json_object_set_new(o, "levels", cluster_levels_view(c));
    return o;
}

json_t *cluster_desired_json(cluster *c)
{
    pthread_mutex_lock(&c->mu);
    json_t *o = desired_locked(c);
    pthread_mutex_unlock(&c->mu);
    return o;
}

static json_t *instances_json(const cluster *c)
{
    json_t *a = json_array();
    for (int i = 0; i < c->spec.n_inst; i++) {
        const cluster_inst *in = &c->spec.inst[i];
        json_t *g = json_array();
        for (int k = 0; k < in->tp; k++)
            json_array_append_new(g, json_string(in->gpu[k]));
        json_array_append_new(a, json_pack("{s:s, s:s, s:i, s:o}", "pool",
                                           prs_infer_class_name(in->pool), "url", in->url, "tp",
                                           in->tp, "gpus", g));
    }
    return a;
}

json_t *cluster_state_json(cluster *c)
{
    pthread_mutex_lock(&c->mu);
    const prs_infer_classes *k = &c->spec.classes;
    json_t *o = json_object();
    json_object_set_new(o, "cluster_id", json_string(c->id));
    json_object_set_new(o, "name", json_string(c->spec.name));
    json_object_set_new(o, "created_unix", json_integer(c->created_unix));
    json_object_set_new(o, "gpus", json_integer(c->spec.gpus));
    json_object_set_new(o, "has_profile", json_boolean(c->caps != NULL));
    json_object_set_new(o, "loads", json_integer(c->loads));
    json_object_set_new(o, "slo",
                        json_pack("{s:[f,f,f], s:f}", "ttft_s", k->ttft_slo_s[0], k->ttft_slo_s[1],
                                  k->ttft_slo_s[2], "tbt_s", k->tbt_slo_s));
    json_object_set_new(o, "classes",
                        json_pack("{s:[i,i], s:[i,i]}", "in_tokens", k->in_limit[0], k->in_limit[1],
                                  "out_tokens", k->out_limit[0], k->out_limit[1]));
    json_object_set_new(o, "instances", instances_json(c));
    json_object_set_new(o, "desired", desired_locked(c));
    pthread_mutex_unlock(&c->mu);
    return o;
}

/* One family's series of cluster c (c->mu held): 0 desired instances, 1 declared instances,
 * 2 desired GPUs, 3 load, 4 plan generation. */
static void series_of(FILE *f, const cluster *c, int family)
{
    int tps[CLUSTER_MAX_TP];
    int ntp = tps_of(c, tps);
    if (family == 4)
        fprintf(f, "perseus_cluster_plan_generation{cluster=\"%s\"} %ld\n", c->id, c->generation);
    for (int k = 0; k < PRS_INFER_NCLASS && family < 4; k++) {
        const char *pool = prs_infer_class_name(k);
        int gpus = 0;
        for (int a = 0; a < ntp; a++) {
            int n = family == 1 ? declared(c, k, tps[a]) : desired(c, k, tps[a]);
            gpus += n * tps[a];
            if (family <= 1)
                fprintf(f,
                        "perseus_cluster_%s_instances{cluster=\"%s\",pool=\"%s\",tp=\"%d\"} %d\n",
                        family ? "declared" : "desired", c->id, pool, tps[a], n);
        }
        if (family == 2)
            fprintf(f, "perseus_cluster_desired_gpus{cluster=\"%s\",pool=\"%s\"} %d\n", c->id, pool,
                    gpus);
        if (family == 3)
            fprintf(f, "perseus_cluster_load_rps{cluster=\"%s\",pool=\"%s\"} %.17g\n", c->id, pool,
                    c->load_rps[k]);
    }
}

void cluster_metrics_write(FILE *f, cluster_table *t)
{
    static const struct {
        const char *name, *help;
    } head[] = {
        {"perseus_cluster_desired_instances",
         "Instances of each TP degree the cluster level wants in each pool for the latest load "
         "(before any load: the declared ones)."},
        {"perseus_cluster_declared_instances",
         "Instances of each TP degree declared in each pool."},
        {"perseus_cluster_desired_gpus", "GPUs the desired instances of a pool hold."},
        {"perseus_cluster_load_rps", "The latest reported load of a pool (requests/s)."},
        {"perseus_cluster_plan_generation", "Plans made for a cluster (0: no load reported yet)."},
        {"perseus_cluster_level_decisions_total",
         "Decisions of a cluster's periodic levels by kind (docs/api.md)."},
    };
    size_t n = 0;
    cluster **all = cluster_pin_all(t, &n);
    for (int fam = 0; fam < 6; fam++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", head[fam].name, head[fam].help, head[fam].name,
                fam == 5 ? "counter" : "gauge");
        for (size_t i = 0; i < n; i++) {
            pthread_mutex_lock(&all[i]->mu);
            if (fam == 5)
                cluster_levels_metrics(f, all[i]);
            else
                series_of(f, all[i], fam);
            pthread_mutex_unlock(&all[i]->mu);
        }
    }
    for (size_t i = 0; i < n; i++)
        cluster_unpin(t, all[i]);
    free(all);
}
