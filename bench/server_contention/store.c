/* server_contention: the store filled directly (SQLite) while the server is stopped. */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>

#include "contention.h"

/* ---- filling the store directly ---- */

void sc_sql_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) sc_die("sqlite: %s: %s", sql, msg);
}

/* Give job id nmeas profiling measurements (round 99: not the job's current round) of
 * wins_per windows each. */
void sc_fill_job(sqlite3 *db, const char *id, long nmeas, long wins_per)
{
    sqlite3_stmt *m = NULL, *w = NULL;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO measurements(job_id, rank, phase, round, iteration,"
                           " clock_mhz, time_s, energy_j, used) VALUES(?1,0,'profiling',99,?2,"
                           "1410,0.5,100.0,1)",
                           -1, &m, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db,
                           "INSERT INTO windows(job_id, measurement_id, stage, instr, microbatch,"
                           " clock_mhz, time_s, energy_j, used) VALUES(?1,?2,0,?3,?4,1410,0.01,"
                           "2.0,1)",
                           -1, &w, NULL) != SQLITE_OK)
        sc_die("sqlite prepare: %s", sqlite3_errmsg(db));
    for (long i = 0; i < nmeas; i++) {
        sqlite3_bind_text(m, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(m, 2, i);
        if (sqlite3_step(m) != SQLITE_DONE) sc_die("sqlite: %s", sqlite3_errmsg(db));
        sqlite3_reset(m);
        sqlite3_int64 mid = sqlite3_last_insert_rowid(db);
        for (long k = 0; k < wins_per; k++) {
            sqlite3_bind_text(w, 1, id, -1, SQLITE_STATIC);
            sqlite3_bind_int64(w, 2, mid);
            sqlite3_bind_int(w, 3, (int)(k & 1));
            sqlite3_bind_int64(w, 4, k / 2);
            if (sqlite3_step(w) != SQLITE_DONE) sc_die("sqlite: %s", sqlite3_errmsg(db));
            sqlite3_reset(w);
        }
    }
    sqlite3_finalize(m);
    sqlite3_finalize(w);
}

/* Stop the server, add the rows, start it again. */
void sc_fill_store(server *s, const fill *f, int nf, const char *const *extra)
{
    sc_server_stop(s);
    sqlite3 *db = NULL;
    if (sqlite3_open(s->db, &db) != SQLITE_OK) sc_die("open %s", s->db);
    double t0 = sc_now_s();
    long rows = 0;
    sc_sql_exec(db, "BEGIN");
    for (int i = 0; i < nf; i++) {
        sc_fill_job(db, f[i].id, f[i].nmeas, f[i].wins_per);
        rows += f[i].nmeas * (1 + f[i].wins_per);
    }
    sc_sql_exec(db, "COMMIT");
    sqlite3_close(db);
    double t1 = sc_now_s();
    sc_server_start(s, extra);
    printf("  store filled: %ld rows in %.1f s; server restarted in %.1f s\n", rows, t1 - t0,
           sc_now_s() - t1);
}

/* Rows of job id left in the store (the jobs row included). */
long sc_rows_left(const char *dbpath, const char *id)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long n = -1;
    if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_busy_timeout(db, 2000) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT (SELECT count(*) FROM jobs WHERE id=?1) + (SELECT count(*)"
                           " FROM measurements WHERE job_id=?1)",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) n = (long)sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}
