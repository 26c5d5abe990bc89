/* Inference clusters in the store (cluster_store.c): each call commits one change in its own
 * transaction, holding the cluster's mutex and then the store's (nothing takes them the other
 * way round), so two changes of one cluster reach the store in the order they were made. 0, or
 * -1 with err (PRS_EIO: storage). */
#ifndef PRS_SERVER_CLUSTER_STORE_H
#define PRS_SERVER_CLUSTER_STORE_H

#include "cluster.h"
#include "server_int.h"

/* A new cluster's row: body is its declaration as posted (the profile is taken from c). */
int cluster_store_insert(prs_server *s, cluster *c, const char *body, size_t len, prs_error *err);
/* The cluster's current profile and latest load. */
int cluster_store_profile(prs_server *s, cluster *c, prs_error *err);
int cluster_store_load(prs_server *s, cluster *c, prs_error *err);
int cluster_store_delete(prs_server *s, const char *id, prs_error *err);
/* Every stored cluster into s->clusters (at start, before serving). */
int cluster_store_restore_all(prs_server *s, prs_error *err);

#endif
