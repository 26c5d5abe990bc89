/* Inference clusters (cluster_spec.c, cluster_table.c, cluster_routes.c, cluster_view.c): a
 * serving cluster declared to perseusd — pools by request class, instances (URL, GPUs by UUID,
 * TP), an inference profile and SLOs — the loads its router reports, and the configuration the
 * cluster and pool levels choose: instances x TP per pool, by the exact sizing of src/infer, run
 * at their periods on the reports as the emulator's dynamic policy runs them (online.h;
 * cluster_levels.c shows and keeps their state), or with periods of 0 on every report at once
 * (plan.h). An autoscaler follows the result (GET .../desired, or the
 * perseus_cluster_desired_instances gauges). docs/api.md, "Inference clusters".
 *
 * Clusters are kept in the store (cluster_store.c: the declaration, the profile, the latest load
 * and the levels' state) and made again from them when the server starts. Locks: the table's mutex
 * (a leaf: held to look up, link, unlink and take references); each cluster's mutex, for its state
 * and its planning, taken with no other lock of this module held; the server's store mutex may be
 * taken while a cluster's is held (cluster_store.c), never the other way round. */
#ifndef PRS_SERVER_CLUSTER_H
#define PRS_SERVER_CLUSTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "capacity.h"
#include "classes.h"
#include "perseus/error.h"
#include "online.h"
#include "plan.h"
#include "secure.h"

#define CLUSTER_MAX 64        /* clusters a server holds */
#define CLUSTER_MAX_INST 256  /* declared instances of one cluster */
#define CLUSTER_MAX_TP 8      /* GPUs of one instance */
#define CLUSTER_MAX_GPUS 4096 /* the GPU budget of one cluster */
#define CLUSTER_URL_MAX 255   /* bytes of an instance URL */
#define CLUSTER_UUID_MAX 63   /* bytes of a GPU UUID */
#define CLUSTER_NAME_MAX 63   /* bytes of a cluster's name */

typedef struct cluster_inst {
    int pool; /* class index, 0 (SS) .. 8 (LL) */
    int tp;
    char url[CLUSTER_URL_MAX + 1];
    char gpu[CLUSTER_MAX_TP][CLUSTER_UUID_MAX + 1];
} cluster_inst;

/* A declaration, as POST /v1/clusters gives it. */
typedef struct cluster_spec {
    char name[CLUSTER_NAME_MAX + 1];
    int gpus; /* the GPU budget the cluster level splits among the pools */
    prs_infer_classes classes;
    double max_util;
    int probe_requests, clocks;
    /* The levels (online.h; both periods 0: every report planned at once on its own rates). */
    double cluster_period_s, pool_period_s, peak_window_s, headroom, start_s, reshard_s;
    int emergencies;
    int n_inst;
    cluster_inst inst[CLUSTER_MAX_INST];
    char *profile_csv; /* owned (NUL-terminated), profile_len bytes */
    size_t profile_len;
} cluster_spec;

/* Parse a declaration (JSON text of len bytes) into *spec (caller-allocated; free with
 * cluster_spec_free). PRS_EINVAL with the field named ("pools.SS.instances[1].tp: ..."). */
int cluster_spec_parse(const char *text, size_t len, cluster_spec *spec, prs_error *err);
void cluster_spec_free(cluster_spec *spec);
/* Parse a load report {"rates_rps": {"SS": 2.5, ...}, "at_unix": T} into rates_rps[9] (absent
 * classes 0) and *at_unix (when the rates were measured; -1 when absent). */
int cluster_load_parse(const char *text, size_t len, double *rates_rps, double *at_unix,
                       prs_error *err);

/* One cluster: its declaration, capacity table and latest plan. */
typedef struct cluster {
    char id[SECURE_ID_LEN + 1];
    uint8_t token_hash[SECURE_SHA256_LEN];
    pthread_mutex_t mu; /* everything below */
    int refs;           /* under the table's mutex */
    int deleted;        /* under the table's mutex */
    cluster_spec spec;
    prs_infer_captable *caps;
    prs_infer_opts opts;
    long generation; /* plans made (0: no load reported yet) */
    double load_rps[PRS_INFER_NCLASS];
    long long load_unix;      /* when the latest load came */
    long loads;               /* load reports accepted */
    prs_infer_plan *plan;     /* the plan in force (NULL before the first load) */
    prs_infer_online *levels; /* the periodic levels (NULL: every report planned at once) */
    char last_error[sizeof(
        ((prs_error *)0)->msg)]; /* the latest load's planning error ("" when it was planned) */
    long long created_unix;
} cluster;

typedef struct cluster_table cluster_table;

cluster_table *cluster_table_new(void);
void cluster_table_free(cluster_table *t);

/* Make a cluster from a declaration (taken over: spec's profile moves into the cluster; spec is
 * left empty): the profile parsed, every instance's TP checked against it, the capacity table
 * built. *out gets a reference (cluster_unpin). PRS_EINVAL (bad profile or declaration, the
 * message naming the field), PRS_ERANGE (the table is full), PRS_ENOMEM. */
int cluster_create(cluster_table *t, cluster_spec *spec, const uint8_t token_hash[], cluster **out,
                   prs_error *err);
/* The same for a cluster read back from the store: its id and creation time kept. */
int cluster_restore(cluster_table *t, cluster_spec *spec, const uint8_t token_hash[],
                    const char *id, long long created_unix, cluster **out, prs_error *err);
/* A reference to cluster id, or NULL. */
cluster *cluster_pin(cluster_table *t, const char *id);
void cluster_unpin(cluster_table *t, cluster *c);
/* Unlink cluster c (the caller's reference stays valid until unpinned). */
void cluster_delete(cluster_table *t, cluster *c);
/* References to every cluster (malloc'd; *n of them). */
cluster **cluster_pin_all(cluster_table *t, size_t *n);

/* Replace the profile (CSV text, copied) and rebuild the capacity table; the latest load is
 * planned again. PRS_EINVAL when the profile is bad or lacks a declared instance's TP. */
int cluster_set_profile(cluster *c, const char *csv, size_t len, prs_error *err);
/* A reported load measured at now_unix (c->mu not held). With the levels (c->levels), the load
 * joins their history and the levels due act (online.h); PRS_ERANGE when a decision could carry
 * only part of its forecast (the plan carries what fits). Without them the load is planned at
 * once: the plan replaces the last on success, PRS_ERANGE when the load does not fit the GPU
 * budget (the previous plan stays). */
int cluster_report_load(cluster *c, const double *rates_rps, double now_unix, prs_error *err);
/* A cluster read back from the store: its latest load (rates, time, reports counted) and the
 * levels' state as saved (NULL, or one that does not load: the levels start afresh from the
 * latest load, planned as a first report). c->mu not held. */
void cluster_restore_load(cluster *c, const double *rates_rps, long long load_unix, long loads,
                          json_t *levels);
/* The levels' state as the store keeps it, and back (cluster_levels.c; c->mu held). */
json_t *cluster_levels_save(const cluster *c);
int cluster_levels_load(cluster *c, json_t *o, prs_error *err);
/* The levels' part of the desired view, and each pool's (c->mu held). */
json_t *cluster_levels_view(const cluster *c);
json_t *cluster_levels_pool_view(const cluster *c, int pool);
/* perseus_cluster_level_decisions_total of cluster c (c->mu held). */
void cluster_levels_metrics(FILE *f, const cluster *c);

/* JSON views (c->mu not held): the state (declaration, load, plan) and the desired
 * configuration. */
json_t *cluster_state_json(cluster *c);
json_t *cluster_desired_json(cluster *c);
/* The Prometheus series of every cluster (docs/api.md). */
void cluster_metrics_write(FILE *f, cluster_table *t);

#endif
