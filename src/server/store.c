/* SQLite storage of the server (store.h).
 *
 * The database runs in WAL mode: readers never block the writer, and a commit is one append to
 * the log. With synchronous=NORMAL a commit survives a crash of the process (kill -9) but not of
 * the machine; --sync full adds an fsync per commit for that. Every statement is prepared once
 * in store_open from a fixed table below; values are bound, never spliced, so nothing a client
 * sends can change the SQL. The schema version is kept in PRAGMA user_version: SCHEMA creates
 * the tables of version 1, and each MIGRATE step brings a database from one version to the next
 * (columns added with ALTER TABLE, so old rows stay and read as NULL or the default), all in the
 * transaction that opens the store.
 *
 * Frontiers are kept as the plans.prs text that prs_frontier_to_plans makes in memory, the bytes
 * prs_frontier_save writes (first plan plus per-point changes: a few kB for a realistic
 * pipeline), so plans are stored as compactly as the planner core stores them and load back
 * exactly (prs_frontier_from_plans).
 *
 * Errors: db_fail is the one failure path (PRS_EIO with SQLite's reason, kept in the handle);
 * every row callback's result is checked and a non-zero one ends the walk (stop). */
#include "store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "perseus/error.h"

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS jobs("
    " id TEXT PRIMARY KEY, token_hash BLOB NOT NULL, spec TEXT NOT NULL,"
    " config_key TEXT NOT NULL, phase TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    " sweep_index INTEGER NOT NULL DEFAULT 0, round INTEGER NOT NULL DEFAULT 0,"
    " planning_s REAL NOT NULL DEFAULT 0, created_unix INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS ranks("
    " job_id TEXT NOT NULL REFERENCES jobs(id), rank INTEGER NOT NULL, dp INTEGER NOT NULL,"
    " pp INTEGER NOT NULL, tp INTEGER NOT NULL, gpu TEXT NOT NULL,"
    " PRIMARY KEY(job_id, rank));"
    "CREATE TABLE IF NOT EXISTS measurements("
    " id INTEGER PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id), rank INTEGER NOT NULL,"
    " phase TEXT NOT NULL, round INTEGER NOT NULL, iteration INTEGER NOT NULL,"
    " clock_mhz INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL,"
    " used INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS measurements_job ON measurements(job_id, round, rank);"
    "CREATE TABLE IF NOT EXISTS windows("
    " job_id TEXT NOT NULL, measurement_id INTEGER NOT NULL REFERENCES measurements(id),"
    " stage INTEGER NOT NULL, instr INTEGER NOT NULL, microbatch INTEGER NOT NULL,"
    " clock_mhz INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL,"
    " used INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS windows_job ON windows(job_id, used);"
    "CREATE TABLE IF NOT EXISTS profiles("
    " job_id TEXT PRIMARY KEY REFERENCES jobs(id), source TEXT NOT NULL, csv BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS frontiers("
    " job_id TEXT PRIMARY KEY REFERENCES jobs(id), config_key TEXT NOT NULL,"
    " plans BLOB NOT NULL, planning_s REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS frontiers_key ON frontiers(config_key);"
    "CREATE TABLE IF NOT EXISTS pipelines("
    " job_id TEXT NOT NULL REFERENCES jobs(id), dp INTEGER NOT NULL,"
    " straggler INTEGER NOT NULL, straggler_time_s REAL NOT NULL, plan_id INTEGER NOT NULL,"
    " PRIMARY KEY(job_id, dp));";

/* MIGRATE[v] brings a version-v database to version v + 1. */
static const char *const MIGRATE[STORE_SCHEMA_VERSION] = {
    [1] = "ALTER TABLE measurements ADD COLUMN pace_s REAL;"
          "ALTER TABLE measurements ADD COLUMN plan_id INTEGER;"
          "ALTER TABLE measurements ADD COLUMN blocking_power_w REAL;"
          "ALTER TABLE pipelines ADD COLUMN prev_plan_id INTEGER NOT NULL DEFAULT -1;"
          "ALTER TABLE pipelines ADD COLUMN from_iteration INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE jobs ADD COLUMN bp_measured_w REAL;"
          "ALTER TABLE jobs ADD COLUMN bp_used_w REAL;",
    [2] = "ALTER TABLE jobs ADD COLUMN finished_unix INTEGER;",
    [3] = "ALTER TABLE pipelines ADD COLUMN pace_hz REAL NOT NULL DEFAULT 0;",
    [4] = "ALTER TABLE pipelines ADD COLUMN newest INTEGER;"
          "ALTER TABLE pipelines ADD COLUMN reports INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE pipelines ADD COLUMN report_time_s REAL NOT NULL DEFAULT 0;"
          "ALTER TABLE pipelines ADD COLUMN report_energy_j REAL NOT NULL DEFAULT 0;",
    [5] = "ALTER TABLE pipelines ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;"
          "CREATE TABLE IF NOT EXISTS rules("
          " job_id TEXT NOT NULL REFERENCES jobs(id), epoch INTEGER NOT NULL,"
          " tprime REAL NOT NULL, slow INTEGER NOT NULL, cap INTEGER NOT NULL,"
          " PRIMARY KEY(job_id, epoch));",
    [6] = "CREATE TABLE IF NOT EXISTS clock_precision("
          " job_id TEXT NOT NULL REFERENCES jobs(id), sweep_index INTEGER NOT NULL,"
          " se_pct REAL NOT NULL, iterations INTEGER NOT NULL,"
          " PRIMARY KEY(job_id, sweep_index));",
    /* Deleting a measurement makes SQLite look for windows that still point at it (the foreign
     * key): without this index, a scan of every window of every job per measurement. */
    [7] = "CREATE INDEX IF NOT EXISTS windows_measurement ON windows(measurement_id);",
};

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
    Q_COUNT
};

static const char *const SQL[Q_COUNT] = {
    [Q_BEGIN] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    [Q_INS_JOB] = "INSERT INTO jobs(id, token_hash, spec, config_key, phase, reason, sweep_index,"
                  " round, planning_s, created_unix, bp_measured_w, bp_used_w, finished_unix)"
                  " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
    [Q_SET_SPEC] = "UPDATE jobs SET spec=?2 WHERE id=?1",
    [Q_UPD_JOB] = "UPDATE jobs SET phase=?2, reason=?3, sweep_index=?4, round=?5, planning_s=?6,"
                  " bp_measured_w=?7, bp_used_w=?8, finished_unix=?9 WHERE id=?1",
    [Q_ALL_JOBS] = "SELECT id, token_hash, spec, config_key, phase, reason, sweep_index, round,"
                   " planning_s, created_unix, bp_measured_w, bp_used_w, finished_unix FROM jobs"
                   " WHERE phase<>'" STORE_PHASE_DELETING "' ORDER BY created_unix, rowid",
    [Q_JOB_BP] = "SELECT bp_measured_w, bp_used_w FROM jobs WHERE id=?1",
    [Q_INS_RANK] = "INSERT INTO ranks(job_id, rank, dp, pp, tp, gpu) VALUES(?1,?2,?3,?4,?5,?6)",
    [Q_RANKS] = "SELECT rank, dp, pp, tp FROM ranks WHERE job_id=?1",
    [Q_INS_MEAS] = "INSERT INTO measurements(job_id, rank, phase, round, iteration, clock_mhz,"
                   " time_s, energy_j, used, pace_s, plan_id, blocking_power_w)"
                   " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
    [Q_INS_WIN] = "INSERT INTO windows(job_id, measurement_id, stage, instr, microbatch,"
                  " clock_mhz, time_s, energy_j, used) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)",
    [Q_COUNT_MEAS] = "SELECT count(*) FROM measurements WHERE job_id=?1",
    [Q_BP] = "SELECT blocking_power_w FROM measurements WHERE job_id=?1 AND used=1"
             " AND blocking_power_w IS NOT NULL ORDER BY blocking_power_w",
    [Q_LATEST] = "SELECT rank, iteration FROM measurements WHERE id IN"
                 " (SELECT max(id) FROM measurements WHERE job_id=?1 GROUP BY rank)",
    [Q_ROUND_COUNTS] = "SELECT rank, count(*) FROM measurements WHERE job_id=?1 AND round=?2"
                       " AND phase='profiling' GROUP BY rank",
    [Q_MEANS] = "SELECT stage, instr, clock_mhz, avg(time_s), avg(energy_j), count(*) FROM windows"
                " WHERE job_id=?1 AND used=1 GROUP BY stage, instr, clock_mhz"
                " ORDER BY stage, clock_mhz DESC, instr",
    [Q_SPREAD] = "SELECT count(*), avg(time_s), avg(time_s*time_s), avg(energy_j),"
                 " avg(energy_j*energy_j) FROM windows"
                 " WHERE job_id=?1 AND used=1 AND clock_mhz=?2 GROUP BY stage, instr",
    [Q_PUT_PROFILE] = "INSERT OR REPLACE INTO profiles(job_id, source, csv) VALUES(?1,?2,?3)",
    [Q_GET_PROFILE] = "SELECT source, csv FROM profiles WHERE job_id=?1",
    [Q_PUT_FRONTIER] = "INSERT OR REPLACE INTO frontiers(job_id, config_key, plans, planning_s)"
                       " VALUES(?1,?2,?3,?4)",
    [Q_GET_FRONTIER] = "SELECT plans FROM frontiers WHERE job_id=?1",
    [Q_FIND_FRONTIER] = "SELECT f.job_id FROM frontiers f JOIN jobs j ON j.id=f.job_id"
                        " WHERE f.config_key=?1 AND f.config_key<>''"
                        " AND j.phase IN ('running','done')"
                        /* it ran: planned early and completed before its ranks were in, it
                         * never served a plan (its pipelines are stored when it runs) */
                        " AND EXISTS (SELECT 1 FROM pipelines p WHERE p.job_id=f.job_id)"
                        " ORDER BY j.created_unix DESC, j.rowid DESC LIMIT 1",
    [Q_PUT_PIPE] =
        "INSERT OR REPLACE INTO pipelines(job_id, dp, straggler, straggler_time_s,"
        " plan_id, prev_plan_id, from_iteration, pace_hz, newest, reports, report_time_s,"
        " report_energy_j, epoch) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
    [Q_PIPES] = "SELECT dp, straggler, straggler_time_s, plan_id, prev_plan_id, from_iteration,"
                " pace_hz, newest, reports, report_time_s, report_energy_j, epoch FROM pipelines"
                " WHERE job_id=?1",
    [Q_PUT_RULE] = "INSERT OR REPLACE INTO rules(job_id, epoch, tprime, slow, cap)"
                   " VALUES(?1,?2,?3,?4,?5)",
    [Q_RULES] = "SELECT epoch, tprime, slow, cap FROM rules WHERE job_id=?1 ORDER BY epoch",
    [Q_DEL_RULES_UPTO] = "DELETE FROM rules WHERE job_id=?1 AND epoch<=?2",
    [Q_DEL_RULES] = "DELETE FROM rules WHERE job_id=?1",
    [Q_PUT_PRECISION] = "INSERT OR REPLACE INTO clock_precision(job_id, sweep_index, se_pct,"
                        " iterations) VALUES(?1,?2,?3,?4)",
    [Q_PRECISIONS] = "SELECT sweep_index, se_pct, iterations FROM clock_precision WHERE job_id=?1",
    [Q_DEL_PRECISIONS] = "DELETE FROM clock_precision WHERE job_id=?1",
    /* Children first: the foreign keys point at jobs and measurements. */
    [Q_DEL_WINDOWS] = "DELETE FROM windows WHERE job_id=?1",
    [Q_DEL_MEAS] = "DELETE FROM measurements WHERE job_id=?1",
    [Q_DEL_RANKS] = "DELETE FROM ranks WHERE job_id=?1",
    [Q_DEL_PROFILE] = "DELETE FROM profiles WHERE job_id=?1",
    [Q_DEL_FRONTIER] = "DELETE FROM frontiers WHERE job_id=?1",
    [Q_DEL_PIPES] = "DELETE FROM pipelines WHERE job_id=?1",
    [Q_DEL_JOB] = "DELETE FROM jobs WHERE id=?1",
    [Q_MARK_DELETING] = "UPDATE jobs SET phase='" STORE_PHASE_DELETING "' WHERE id=?1",
    [Q_NEXT_DELETING] = "SELECT id FROM jobs WHERE phase='" STORE_PHASE_DELETING "' LIMIT 1",
    [Q_PURGE_WINDOWS] = "DELETE FROM windows WHERE rowid IN"
                        " (SELECT rowid FROM windows WHERE job_id=?1 LIMIT ?2)",
    [Q_PURGE_MEAS] = "DELETE FROM measurements WHERE id IN"
                     " (SELECT id FROM measurements WHERE job_id=?1 LIMIT ?2)",
};

struct store {
    sqlite3 *db;
    sqlite3_stmt *q[Q_COUNT];
    prs_error err; /* the last failure */
};

const prs_error *store_error(const store *s)
{
    return &s->err;
}

/* The store's one failure path: record what failed with SQLite's reason; PRS_EIO. */
static int db_fail(store *s, const char *what)
{
    return prs_error_set(&s->err, PRS_EIO, "%s: %s", what, sqlite3_errmsg(s->db));
}

/* Reset and clear a cached statement before use. */
static sqlite3_stmt *stmt(store *s, int q)
{
    sqlite3_reset(s->q[q]);
    sqlite3_clear_bindings(s->q[q]);
    return s->q[q];
}

/* A row callback stopped the walk with r: release the statement and hand r back. */
static int stop(sqlite3_stmt *st, int r)
{
    sqlite3_reset(st);
    return r;
}

/* Run a statement that returns no rows. */
static int exec_done(store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, what);
}

void store_close(store *s)
{
    if (!s) return;
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(s->q[i]);
    sqlite3_close(s->db);
    free(s);
}

/* Create the version-1 tables if missing, run the migrations from version (0: a new database)
 * up, record the version and commit. An SQLite result code; *emsg set on failure. */
static int upgrade_schema(sqlite3 *db, int version, char **emsg)
{
    int rc = sqlite3_exec(db, SCHEMA, NULL, NULL, emsg);
    for (int v = version < 1 ? 1 : version; rc == SQLITE_OK && v < STORE_SCHEMA_VERSION; v++)
        rc = sqlite3_exec(db, MIGRATE[v], NULL, NULL, emsg);
    char pv[64];
    snprintf(pv, sizeof pv, "PRAGMA user_version=%d; COMMIT;", STORE_SCHEMA_VERSION);
    return rc == SQLITE_OK ? sqlite3_exec(db, pv, NULL, NULL, emsg) : rc;
}

int store_open(const char *path, int full_sync, store **out, prs_error *err)
{
    *out = NULL;
    store *s = calloc(1, sizeof *s);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = sqlite3_open_v2(
        path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        prs_error_set(err, PRS_EIO, "%s: cannot open database: %s", path,
                      s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        store_close(s);
        return PRS_EIO;
    }
    sqlite3_busy_timeout(s->db, 5000);
    char *emsg = NULL;
    /* journal_size_limit: once a checkpoint has let the WAL start over, a WAL grown past it by
     * one large transaction (a profile upload) is truncated back to it */
    /* auto_vacuum: a new database keeps track of its free pages so that they can be given back
     * to the file system a few at a time (store_vacuum_step); on an older one it changes
     * nothing (switching needs a VACUUM of the whole file). */
    char pragmas[240];
    snprintf(pragmas, sizeof pragmas,
             "PRAGMA auto_vacuum=INCREMENTAL; PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;"
             " PRAGMA foreign_keys=ON;"
             " PRAGMA journal_size_limit=%ld;",
             full_sync ? "FULL" : "NORMAL", (long)STORE_WAL_LIMIT_BYTES);
    if (sqlite3_exec(s->db, pragmas, NULL, NULL, &emsg) != SQLITE_OK ||
        sqlite3_exec(s->db, "BEGIN", NULL, NULL, &emsg) != SQLITE_OK) {
        prs_error_set(err, PRS_EIO, "%s: %s", path, emsg ? emsg : "cannot configure database");
        sqlite3_free(emsg);
        store_close(s);
        return PRS_EIO;
    }
    sqlite3_stmt *v = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &v, NULL) == SQLITE_OK &&
        sqlite3_step(v) == SQLITE_ROW)
        version = sqlite3_column_int(v, 0);
    sqlite3_finalize(v);
    if (version < 0 || version > STORE_SCHEMA_VERSION) {
        store_close(s);
        return prs_error_set(err, PRS_EINVAL,
                             "%s: database schema version %d is newer than this server's (%d)",
                             path, version, STORE_SCHEMA_VERSION);
    }
    if (upgrade_schema(s->db, version, &emsg) != SQLITE_OK) {
        prs_error_set(err, PRS_EIO, "%s: cannot create or upgrade the schema: %s", path,
                      emsg ? emsg : "?");
        sqlite3_free(emsg);
        store_close(s);
        return PRS_EIO;
    }
    for (int i = 0; i < Q_COUNT; i++)
        if (sqlite3_prepare_v3(s->db, SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &s->q[i], NULL) !=
            SQLITE_OK) {
            prs_error_set(err, PRS_EIO, "%s: cannot prepare statement %d: %s", path, i,
                          sqlite3_errmsg(s->db));
            store_close(s);
            return PRS_EIO;
        }
    *out = s;
    return 0;
}

long long store_total_changes(store *s)
{
    return (long long)sqlite3_total_changes64(s->db);
}

int store_begin(store *s)
{
    return exec_done(s, stmt(s, Q_BEGIN), "begin");
}

int store_commit(store *s)
{
    return exec_done(s, stmt(s, Q_COMMIT), "commit");
}

void store_rollback(store *s)
{
    if (!sqlite3_get_autocommit(s->db)) exec_done(s, stmt(s, Q_ROLLBACK), "rollback");
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    sqlite3_bind_text(st, i, v ? v : "", -1, SQLITE_TRANSIENT);
}

/* A positive real, or NULL for 0 (not known). */
static void bind_opt_real(sqlite3_stmt *st, int i, double v)
{
    if (v > 0)
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

/* A time in seconds since the epoch, or NULL for 0 (none). */
static void bind_opt_time(sqlite3_stmt *st, int i, long long v)
{
    if (v > 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

int store_insert_job(store *s, const store_job_row *j)
{
    sqlite3_stmt *st = stmt(s, Q_INS_JOB);
    bind_text(st, 1, j->id);
    sqlite3_bind_blob(st, 2, j->token_hash, 32, SQLITE_TRANSIENT);
    bind_text(st, 3, j->spec_json);
    bind_text(st, 4, j->config_key);
    bind_text(st, 5, j->phase);
    bind_text(st, 6, j->reason);
    sqlite3_bind_int64(st, 7, j->sweep_index);
    sqlite3_bind_int64(st, 8, j->round);
    sqlite3_bind_double(st, 9, j->planning_s);
    sqlite3_bind_int64(st, 10, j->created_unix);
    bind_opt_real(st, 11, j->bp_measured_w);
    bind_opt_real(st, 12, j->bp_used_w);
    bind_opt_time(st, 13, j->finished_unix);
    return exec_done(s, st, "insert job");
}

int store_update_job(store *s, const store_job_row *j)
{
    sqlite3_stmt *st = stmt(s, Q_UPD_JOB);
    bind_text(st, 1, j->id);
    bind_text(st, 2, j->phase);
    bind_text(st, 3, j->reason);
    sqlite3_bind_int64(st, 4, j->sweep_index);
    sqlite3_bind_int64(st, 5, j->round);
    sqlite3_bind_double(st, 6, j->planning_s);
    bind_opt_real(st, 7, j->bp_measured_w);
    bind_opt_real(st, 8, j->bp_used_w);
    bind_opt_time(st, 9, j->finished_unix);
    return exec_done(s, st, "update job");
}

int store_set_job_spec(store *s, const char *id, const char *spec_json)
{
    sqlite3_stmt *st = stmt(s, Q_SET_SPEC);
    bind_text(st, 1, id);
    bind_text(st, 2, spec_json);
    return exec_done(s, st, "update job spec");
}

int store_delete_job(store *s, const char *id)
{
    static const int QS[] = {Q_DEL_WINDOWS, Q_DEL_MEAS,       Q_DEL_RANKS,
                             Q_DEL_PROFILE, Q_DEL_FRONTIER,   Q_DEL_PIPES,
                             Q_DEL_RULES,   Q_DEL_PRECISIONS, Q_DEL_JOB};
    for (size_t i = 0; i < sizeof QS / sizeof QS[0]; i++) {
        sqlite3_stmt *st = stmt(s, QS[i]);
        bind_text(st, 1, id);
        if (exec_done(s, st, "delete job")) return PRS_EIO;
    }
    return 0;
}

/* The value of a PRAGMA that returns one integer, or -1. */
static long pragma_long(store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long v = -1;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int store_vacuum_step(store *s, long max_pages, long *left)
{
    *left = 0;
    if (pragma_long(s, "PRAGMA auto_vacuum") != 2) return 0; /* not incremental: nothing to do */
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA incremental_vacuum(%ld)", max_pages > 0 ? max_pages : 1);
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        prs_error_set(&s->err, PRS_EIO, "incremental vacuum: %s", msg ? msg : "?");
        sqlite3_free(msg);
        return PRS_EIO;
    }
    long n = pragma_long(s, "PRAGMA freelist_count");
    if (n < 0) return db_fail(s, "freelist count");
    *left = n;
    return 0;
}

int store_mark_deleting(store *s, const char *id)
{
    sqlite3_stmt *st = stmt(s, Q_MARK_DELETING);
    bind_text(st, 1, id);
    return exec_done(s, st, "mark job deleted");
}

int store_next_deleting(store *s, char id_out[32])
{
    id_out[0] = '\0';
    sqlite3_stmt *st = stmt(s, Q_NEXT_DELETING);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(id_out, 32, "%s", t ? (const char *)t : "");
    } else if (rc != SQLITE_DONE) {
        r = db_fail(s, "find deleted job");
    }
    sqlite3_reset(st);
    return r;
}

/* Delete at most max_rows rows of one of the job's large tables (q): their number, or -1. */
static long purge_some(store *s, int q, const char *id, long max_rows)
{
    sqlite3_stmt *st = stmt(s, q);
    bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, max_rows);
    if (exec_done(s, st, "purge deleted job")) return -1;
    return (long)sqlite3_changes(s->db);
}

int store_purge_step(store *s, const char *id, long max_rows, long *deleted, int *done)
{
    *deleted = 0;
    *done = 0;
    /* Children first: windows point at measurements, everything at the job. */
    long n = purge_some(s, Q_PURGE_WINDOWS, id, max_rows);
    if (n == 0) n = purge_some(s, Q_PURGE_MEAS, id, max_rows);
    if (n < 0) return PRS_EIO;
    *deleted = n;
    if (n > 0) return 0;
    if (store_delete_job(s, id)) return PRS_EIO; /* the small tables and the job's row */
    *done = 1;
    return 0;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

int store_each_job(store *s, int (*fn)(void *ud, const store_job_row *j), void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_ALL_JOBS);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_job_row j;
        uint8_t hash[32] = {0};
        const void *h = sqlite3_column_blob(st, 1);
        if (h && sqlite3_column_bytes(st, 1) == 32) memcpy(hash, h, 32);
        j.id = col_text(st, 0);
        j.token_hash = hash;
        j.spec_json = col_text(st, 2);
        j.config_key = col_text(st, 3);
        j.phase = col_text(st, 4);
        j.reason = col_text(st, 5);
        j.sweep_index = (long)sqlite3_column_int64(st, 6);
        j.round = (long)sqlite3_column_int64(st, 7);
        j.planning_s = sqlite3_column_double(st, 8);
        j.created_unix = sqlite3_column_int64(st, 9);
        j.bp_measured_w = sqlite3_column_double(st, 10); /* NULL reads as 0 */
        j.bp_used_w = sqlite3_column_double(st, 11);
        j.finished_unix = sqlite3_column_int64(st, 12); /* NULL reads as 0 */
        int r = fn(ud, &j);
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "load jobs");
}

int store_job_blocking_power(store *s, const char *id, double *measured_w, double *used_w)
{
    *measured_w = *used_w = 0;
    sqlite3_stmt *st = stmt(s, Q_JOB_BP);
    bind_text(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *measured_w = sqlite3_column_double(st, 0); /* NULL reads as 0 */
        *used_w = sqlite3_column_double(st, 1);
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(s, "job blocking power");
}

int store_insert_rank(store *s, const char *job, int rank, int dp, int pp, int tp, const char *gpu)
{
    sqlite3_stmt *st = stmt(s, Q_INS_RANK);
    bind_text(st, 1, job);
    sqlite3_bind_int(st, 2, rank);
    sqlite3_bind_int(st, 3, dp);
    sqlite3_bind_int(st, 4, pp);
    sqlite3_bind_int(st, 5, tp);
    bind_text(st, 6, gpu);
    return exec_done(s, st, "insert rank");
}

int store_each_rank(store *s, const char *job,
                    int (*fn)(void *ud, int rank, int dp, int pp, int tp), void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_RANKS);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int r = fn(ud, sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
                   sqlite3_column_int(st, 2), sqlite3_column_int(st, 3));
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "load ranks");
}

int store_insert_measurement(store *s, const char *job, const store_meas_row *m, long long *id)
{
    sqlite3_stmt *st = stmt(s, Q_INS_MEAS);
    bind_text(st, 1, job);
    sqlite3_bind_int(st, 2, m->rank);
    bind_text(st, 3, m->phase);
    sqlite3_bind_int64(st, 4, m->round);
    sqlite3_bind_int64(st, 5, m->iteration);
    sqlite3_bind_int(st, 6, m->clock_mhz);
    sqlite3_bind_double(st, 7, m->time_s);
    sqlite3_bind_double(st, 8, m->energy_j);
    sqlite3_bind_int(st, 9, m->used);
    bind_opt_real(st, 10, m->pace_s);
    if (m->plan_id >= 0)
        sqlite3_bind_int64(st, 11, m->plan_id);
    else
        sqlite3_bind_null(st, 11);
    bind_opt_real(st, 12, m->blocking_power_w);
    int rc = exec_done(s, st, "insert measurement");
    if (rc) return rc;
    *id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int store_insert_window(store *s, const char *job, long long measurement, int stage, int instr,
                        int microbatch, int clock_mhz, double time_s, double energy_j, int used)
{
    sqlite3_stmt *st = stmt(s, Q_INS_WIN);
    bind_text(st, 1, job);
    sqlite3_bind_int64(st, 2, measurement);
    sqlite3_bind_int(st, 3, stage);
    sqlite3_bind_int(st, 4, instr);
    sqlite3_bind_int(st, 5, microbatch);
    sqlite3_bind_int(st, 6, clock_mhz);
    sqlite3_bind_double(st, 7, time_s);
    sqlite3_bind_double(st, 8, energy_j);
    sqlite3_bind_int(st, 9, used);
    return exec_done(s, st, "insert window");
}

long long store_count_measurements(store *s, const char *job)
{
    sqlite3_stmt *st = stmt(s, Q_COUNT_MEAS);
    bind_text(st, 1, job);
    long long n = -1;
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    else
        db_fail(s, "count measurements");
    sqlite3_reset(st);
    return n;
}

int store_blocking_powers(store *s, const char *job, int (*fn)(void *ud, double watts), void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_BP);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int r = fn(ud, sqlite3_column_double(st, 0));
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "blocking powers");
}

int store_latest_iterations(store *s, const char *job, int (*fn)(void *ud, int rank, long it),
                            void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_LATEST);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int r = fn(ud, sqlite3_column_int(st, 0), (long)sqlite3_column_int64(st, 1));
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "latest iterations");
}

int store_round_counts(store *s, const char *job, long round,
                       int (*fn)(void *ud, int rank, long count), void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_ROUND_COUNTS);
    bind_text(st, 1, job);
    sqlite3_bind_int64(st, 2, round);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int r = fn(ud, sqlite3_column_int(st, 0), (long)sqlite3_column_int64(st, 1));
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "round counts");
}

int store_profile_means(store *s, const char *job,
                        int (*fn)(void *ud, int stage, int instr, int clock, double time_s,
                                  double energy_j, long n),
                        void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_MEANS);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int r = fn(ud, sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
                   sqlite3_column_int(st, 2), sqlite3_column_double(st, 3),
                   sqlite3_column_double(st, 4), (long)sqlite3_column_int64(st, 5));
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "profile means");
}

/* Relative standard error of a mean from n samples with mean m and mean square m2. */
static double rel_se(long n, double m, double m2)
{
    if (n < 2 || !(m > 0)) return INFINITY;
    double var = (m2 - m * m) * (double)n / (double)(n - 1);
    return sqrt(var > 0 ? var : 0) / sqrt((double)n) / m;
}

int store_clock_spread(store *s, const char *job, int clock_mhz, double *max_rel_se)
{
    sqlite3_stmt *st = stmt(s, Q_SPREAD);
    bind_text(st, 1, job);
    sqlite3_bind_int(st, 2, clock_mhz);
    *max_rel_se = 0;
    int rc, rows = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        long n = (long)sqlite3_column_int64(st, 0);
        double t = rel_se(n, sqlite3_column_double(st, 1), sqlite3_column_double(st, 2));
        double e = rel_se(n, sqlite3_column_double(st, 3), sqlite3_column_double(st, 4));
        *max_rel_se = fmax(*max_rel_se, fmax(t, e));
        rows++;
    }
    sqlite3_reset(st);
    if (!rows) *max_rel_se = INFINITY;
    return rc == SQLITE_DONE ? 0 : db_fail(s, "clock spread");
}

int store_put_profile(store *s, const char *job, const char *source, const char *csv, size_t len)
{
    sqlite3_stmt *st = stmt(s, Q_PUT_PROFILE);
    bind_text(st, 1, job);
    bind_text(st, 2, source);
    sqlite3_bind_blob64(st, 3, csv, len, SQLITE_TRANSIENT);
    return exec_done(s, st, "store profile");
}

/* Copy column i of the current row into a new NUL-terminated buffer. */
static int copy_blob(store *s, sqlite3_stmt *st, int i, void **out, size_t *len)
{
    const void *b = sqlite3_column_blob(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    char *p = malloc(n + 1);
    if (!p) return prs_error_set(&s->err, PRS_ENOMEM, "out of memory");
    if (n) memcpy(p, b, n);
    p[n] = '\0';
    *out = p;
    *len = n;
    return 0;
}

int store_get_profile(store *s, const char *job, char **csv, size_t *len, char source[16])
{
    *csv = NULL;
    *len = 0;
    sqlite3_stmt *st = stmt(s, Q_GET_PROFILE);
    bind_text(st, 1, job);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW) {
        snprintf(source, 16, "%s", col_text(st, 0));
        r = copy_blob(s, st, 1, (void **)csv, len);
    } else if (rc != SQLITE_DONE) {
        r = db_fail(s, "get profile");
    }
    sqlite3_reset(st);
    return r;
}

int store_put_frontier(store *s, const char *job, const char *config_key, const void *blob,
                       size_t len, double planning_s)
{
    sqlite3_stmt *st = stmt(s, Q_PUT_FRONTIER);
    bind_text(st, 1, job);
    bind_text(st, 2, config_key);
    sqlite3_bind_blob64(st, 3, blob, len, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 4, planning_s);
    return exec_done(s, st, "store frontier");
}

int store_get_frontier(store *s, const char *job, void **blob, size_t *len)
{
    *blob = NULL;
    *len = 0;
    sqlite3_stmt *st = stmt(s, Q_GET_FRONTIER);
    bind_text(st, 1, job);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW)
        r = copy_blob(s, st, 0, blob, len);
    else if (rc != SQLITE_DONE)
        r = db_fail(s, "get frontier");
    sqlite3_reset(st);
    return r;
}

int store_find_frontier(store *s, const char *config_key, char job_out[32])
{
    job_out[0] = '\0';
    sqlite3_stmt *st = stmt(s, Q_FIND_FRONTIER);
    bind_text(st, 1, config_key);
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW)
        snprintf(job_out, 32, "%s", col_text(st, 0));
    else if (rc != SQLITE_DONE)
        r = db_fail(s, "find frontier");
    sqlite3_reset(st);
    return r;
}

int store_put_pipeline(store *s, const char *job, const store_pipe_row *p)
{
    sqlite3_stmt *st = stmt(s, Q_PUT_PIPE);
    bind_text(st, 1, job);
    sqlite3_bind_int(st, 2, p->dp);
    sqlite3_bind_int(st, 3, p->straggler);
    sqlite3_bind_double(st, 4, p->straggler_time_s);
    sqlite3_bind_int64(st, 5, p->plan_id);
    sqlite3_bind_int64(st, 6, p->prev_plan_id);
    sqlite3_bind_int64(st, 7, p->from_iteration);
    sqlite3_bind_double(st, 8, p->pace_hz);
    if (p->newest == STORE_NEWEST_UNKNOWN)
        sqlite3_bind_null(st, 9);
    else
        sqlite3_bind_int64(st, 9, p->newest);
    sqlite3_bind_int64(st, 10, p->reports);
    sqlite3_bind_double(st, 11, p->report_time_s);
    sqlite3_bind_double(st, 12, p->report_energy_j);
    sqlite3_bind_int64(st, 13, p->epoch);
    return exec_done(s, st, "store pipeline");
}

int store_each_pipeline(store *s, const char *job, int (*fn)(void *ud, const store_pipe_row *p),
                        void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_PIPES);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_pipe_row p = {.dp = sqlite3_column_int(st, 0),
                            .straggler = sqlite3_column_int(st, 1),
                            .straggler_time_s = sqlite3_column_double(st, 2),
                            .plan_id = (long)sqlite3_column_int64(st, 3),
                            .prev_plan_id = (long)sqlite3_column_int64(st, 4),
                            .from_iteration = (long)sqlite3_column_int64(st, 5),
                            .pace_hz = sqlite3_column_double(st, 6),
                            .newest = sqlite3_column_type(st, 7) == SQLITE_NULL
                                          ? STORE_NEWEST_UNKNOWN
                                          : (long)sqlite3_column_int64(st, 7),
                            .reports = sqlite3_column_int64(st, 8),
                            .report_time_s = sqlite3_column_double(st, 9),
                            .report_energy_j = sqlite3_column_double(st, 10),
                            .epoch = (long)sqlite3_column_int64(st, 11)};
        int r = fn(ud, &p);
        if (r) return stop(st, r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "load pipelines");
}

int store_put_rule(store *s, const char *job, const store_rule_row *r)
{
    sqlite3_stmt *st = stmt(s, Q_PUT_RULE);
    bind_text(st, 1, job);
    sqlite3_bind_int64(st, 2, r->epoch);
    sqlite3_bind_double(st, 3, r->tprime);
    sqlite3_bind_int64(st, 4, r->slow);
    sqlite3_bind_int64(st, 5, r->cap);
    return exec_done(s, st, "store plan rule");
}

int store_each_rule(store *s, const char *job, int (*fn)(void *ud, const store_rule_row *r),
                    void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_RULES);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_rule_row r = {(long)sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1),
                            (long)sqlite3_column_int64(st, 2), (long)sqlite3_column_int64(st, 3)};
        int x = fn(ud, &r);
        if (x) return stop(st, x);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "load plan rules");
}

int store_delete_rules(store *s, const char *job, long upto)
{
    sqlite3_stmt *st = stmt(s, Q_DEL_RULES_UPTO);
    bind_text(st, 1, job);
    sqlite3_bind_int64(st, 2, upto);
    return exec_done(s, st, "delete plan rules");
}

int store_put_precision(store *s, const char *job, long sweep_index, double se_pct, int iterations)
{
    sqlite3_stmt *st = stmt(s, Q_PUT_PRECISION);
    bind_text(st, 1, job);
    sqlite3_bind_int64(st, 2, sweep_index);
    sqlite3_bind_double(st, 3, se_pct);
    sqlite3_bind_int(st, 4, iterations);
    return exec_done(s, st, "store clock precision");
}

int store_each_precision(store *s, const char *job,
                         int (*fn)(void *ud, long sweep_index, double se_pct, int iterations),
                         void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_PRECISIONS);
    bind_text(st, 1, job);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int x = fn(ud, (long)sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1),
                   sqlite3_column_int(st, 2));
        if (x) return stop(st, x);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "load clock precision");
}
