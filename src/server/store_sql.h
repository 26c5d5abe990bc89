/* The SQL text of the store (store.c): its schema, the migrations from one schema version to the
 * next, and the statements, one per Q_* id, prepared once when the store opens. Internal to the
 * store. */
#ifndef PRS_SERVER_STORE_SQL_H
#define PRS_SERVER_STORE_SQL_H

#include "store_schema.h"

/* The tables of schema version 1. */
extern const char STORE_SQL_SCHEMA[];
/* STORE_SQL_MIGRATE[v] brings a version-v database to version v + 1. */
extern const char *const STORE_SQL_MIGRATE[STORE_SCHEMA_VERSION];

/* The statements, by id. */
enum {
    Q_BEGIN,
    Q_COMMIT,
    Q_ROLLBACK,
    Q_INS_JOB,
    Q_UPD_JOB,
    Q_SET_SPEC,
    Q_ALL_JOBS,
    Q_JOB_BP,
    Q_INS_RANK,
    Q_RANKS,
    Q_INS_MEAS,
    Q_INS_WIN,
    Q_COUNT_MEAS,
    Q_BP,
    Q_LATEST,
    Q_ROUND_COUNTS,
    Q_MEANS,
    Q_PUT_PROFILE,
    Q_GET_PROFILE,
    Q_PUT_FRONTIER,
    Q_GET_FRONTIER,
    Q_FIND_FRONTIER,
    Q_PUT_PIPE,
    Q_PIPES,
    Q_PUT_RULE,
    Q_RULES,
    Q_DEL_RULES_UPTO,
    Q_DEL_RULES,
    Q_PUT_PRECISION,
    Q_PRECISIONS,
    Q_DEL_PRECISIONS,
    Q_DEL_WINDOWS,
    Q_DEL_MEAS,
    Q_DEL_RANKS,
    Q_DEL_PROFILE,
    Q_DEL_FRONTIER,
    Q_DEL_PIPES,
    Q_DEL_JOB,
    Q_SPREAD,
    Q_MARK_DELETING,
    Q_NEXT_DELETING,
    Q_PURGE_WINDOWS,
    Q_PURGE_MEAS,
    Q_INS_CLUSTER,
    Q_SET_CLUSTER_PROFILE,
    Q_SET_CLUSTER_LOAD,
    Q_DEL_CLUSTER,
    Q_ALL_CLUSTERS,
    Q_COUNT
};

extern const char *const STORE_SQL[Q_COUNT];

#endif
