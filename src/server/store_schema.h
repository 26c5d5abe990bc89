/* Facts of the store's format that its SQL (store_sql.c) and its callers (store.h) share: the
 * schema version and the phase of a deleted job's row. */
#ifndef PRS_SERVER_STORE_SCHEMA_H
#define PRS_SERVER_STORE_SCHEMA_H

/* 1: the first schema. 2: per-iteration pace, plan and blocking power; each pipeline's switch
 * iteration and previous plan; the job's measured and used blocking power. 3: the job's finish
 * time. 4: each pipeline's pace. 5: each pipeline's newest iteration and the aggregates of the
 * results posted after profiling (no row per iteration after profiling). 6: the plan rules of
 * running jobs, and the last rule each pipeline applied. 7: the precision each profiled clock
 * reached. 8: an index on windows(measurement_id), so that deleting a measurement does not scan
 * every window (the foreign key's check). 9: inference clusters (their declaration, profile and
 * latest load). An older database is upgraded in place when opened. */
#define STORE_SCHEMA_VERSION 9

/* The phase a job's row has between its deletion and the purge of its rows (store_purge_step):
 * store_each_job skips it, so a restart does not bring the job back. */
#define STORE_PHASE_DELETING "deleting"

#endif
