/* SQLite storage of the server (store.h).
 *
 * The database runs in WAL mode: readers never block the writer, and a commit is one append to
 * the log. With synchronous=NORMAL a commit survives a crash of the process (kill -9) but not of
 * the machine; --sync full adds an fsync per commit for that. Every statement is prepared once
 * in store_open from a fixed table (store_sql.c); values are bound, never spliced, so nothing a
 * client sends can change the SQL. The schema version is kept in PRAGMA user_version: SCHEMA
 * creates the tables of version 1, and each migration step brings a database from one version to
 * the next (columns added with ALTER TABLE, so old rows stay and read as NULL or the default), all
 * in the transaction that opens the store.
 *
 * Frontiers are kept as the plans.prs text that prs_frontier_to_plans makes in memory, the bytes
 * prs_frontier_save writes (first plan plus per-point changes: a few kB for a realistic
 * pipeline), so plans are stored as compactly as the planner core stores them and load back
 * exactly (prs_frontier_from_plans).
 *
 * Errors: db_fail is the one failure path (PRS_EIO with SQLite's reason, kept in the handle);
 * every row callback's result is checked and a non-zero one ends the walk (stop). */
#include "store.h"
#include "store_sql.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "perseus/error.h"

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
    int rc = sqlite3_exec(db, STORE_SQL_SCHEMA, NULL, NULL, emsg);
    for (int v = version < 1 ? 1 : version; rc == SQLITE_OK && v < STORE_SCHEMA_VERSION; v++)
        rc = sqlite3_exec(db, STORE_SQL_MIGRATE[v], NULL, NULL, emsg);
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
        if (sqlite3_prepare_v3(s->db, STORE_SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &s->q[i],
                               NULL) != SQLITE_OK) {
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

int store_insert_cluster(store *s, const store_cluster_row *c)
{
    sqlite3_stmt *st = stmt(s, Q_INS_CLUSTER);
    bind_text(st, 1, c->id);
    sqlite3_bind_blob(st, 2, c->token_hash, 32, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, c->created_unix);
    bind_text(st, 4, c->spec_json);
    if (c->profile)
        sqlite3_bind_blob64(st, 5, c->profile, c->profile_len, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 5);
    return exec_done(s, st, "store cluster");
}

int store_set_cluster_profile(store *s, const char *id, const char *csv, size_t len)
{
    sqlite3_stmt *st = stmt(s, Q_SET_CLUSTER_PROFILE);
    bind_text(st, 1, id);
    sqlite3_bind_blob64(st, 2, csv, len, SQLITE_TRANSIENT);
    return exec_done(s, st, "store cluster profile");
}

int store_set_cluster_load(store *s, const char *id, const char *load_json, long long load_unix,
                           long loads)
{
    sqlite3_stmt *st = stmt(s, Q_SET_CLUSTER_LOAD);
    bind_text(st, 1, id);
    bind_text(st, 2, load_json);
    sqlite3_bind_int64(st, 3, load_unix);
    sqlite3_bind_int64(st, 4, loads);
    return exec_done(s, st, "store cluster load");
}

int store_delete_cluster(store *s, const char *id)
{
    sqlite3_stmt *st = stmt(s, Q_DEL_CLUSTER);
    bind_text(st, 1, id);
    return exec_done(s, st, "delete cluster");
}

int store_each_cluster(store *s, int (*fn)(void *ud, const store_cluster_row *c), void *ud)
{
    sqlite3_stmt *st = stmt(s, Q_ALL_CLUSTERS);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint8_t hash[32] = {0};
        const void *h = sqlite3_column_blob(st, 1);
        if (h && sqlite3_column_bytes(st, 1) == 32) memcpy(hash, h, 32);
        store_cluster_row c = {col_text(st, 0),
                               hash,
                               sqlite3_column_int64(st, 2),
                               col_text(st, 3),
                               NULL,
                               0,
                               NULL,
                               sqlite3_column_int64(st, 6),
                               (long)sqlite3_column_int64(st, 7)};
        if (sqlite3_column_type(st, 4) != SQLITE_NULL) {
            c.profile = sqlite3_column_blob(st, 4);
            c.profile_len = (size_t)sqlite3_column_bytes(st, 4);
        }
        if (sqlite3_column_type(st, 5) != SQLITE_NULL) c.load_json = col_text(st, 5);
        int x = fn(ud, &c);
        if (x) return stop(st, x);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(s, "load clusters");
}
