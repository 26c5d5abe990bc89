/* store.h: schema versions. A database written by the first schema (version 1) is upgraded in
 * place when opened: its rows stay, the new columns read as "not given", and the new values are
 * stored and read back. A database from a newer server is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "server_harness.h"
#include "store.h"

static char dir[256], db[320];

/* The tables as version 1 created them, with one job, rank, measurement and pipeline. */
static const char V1[] =
    "CREATE TABLE jobs(id TEXT PRIMARY KEY, token_hash BLOB NOT NULL, spec TEXT NOT NULL,"
    " config_key TEXT NOT NULL, phase TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    " sweep_index INTEGER NOT NULL DEFAULT 0, round INTEGER NOT NULL DEFAULT 0,"
    " planning_s REAL NOT NULL DEFAULT 0, created_unix INTEGER NOT NULL);"
    "CREATE TABLE ranks(job_id TEXT NOT NULL REFERENCES jobs(id), rank INTEGER NOT NULL,"
    " dp INTEGER NOT NULL, pp INTEGER NOT NULL, tp INTEGER NOT NULL, gpu TEXT NOT NULL,"
    " PRIMARY KEY(job_id, rank));"
    "CREATE TABLE measurements(id INTEGER PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id),"
    " rank INTEGER NOT NULL, phase TEXT NOT NULL, round INTEGER NOT NULL,"
    " iteration INTEGER NOT NULL, clock_mhz INTEGER NOT NULL, time_s REAL NOT NULL,"
    " energy_j REAL NOT NULL, used INTEGER NOT NULL);"
    "CREATE TABLE windows(job_id TEXT NOT NULL,"
    " measurement_id INTEGER NOT NULL REFERENCES measurements(id), stage INTEGER NOT NULL,"
    " instr INTEGER NOT NULL, microbatch INTEGER NOT NULL, clock_mhz INTEGER NOT NULL,"
    " time_s REAL NOT NULL, energy_j REAL NOT NULL, used INTEGER NOT NULL);"
    "CREATE TABLE profiles(job_id TEXT PRIMARY KEY REFERENCES jobs(id), source TEXT NOT NULL,"
    " csv BLOB NOT NULL);"
    "CREATE TABLE frontiers(job_id TEXT PRIMARY KEY REFERENCES jobs(id),"
    " config_key TEXT NOT NULL, plans BLOB NOT NULL, planning_s REAL NOT NULL);"
    "CREATE TABLE pipelines(job_id TEXT NOT NULL REFERENCES jobs(id), dp INTEGER NOT NULL,"
    " straggler INTEGER NOT NULL, straggler_time_s REAL NOT NULL, plan_id INTEGER NOT NULL,"
    " PRIMARY KEY(job_id, dp));"
    "INSERT INTO jobs VALUES('OLDJOBOLDJOBOLD1', x'00', '{}', '', 'running', '', 3, 7, 0.5, 9);"
    "INSERT INTO ranks VALUES('OLDJOBOLDJOBOLD1', 0, 0, 0, 0, 'gpu');"
    "INSERT INTO measurements VALUES(1, 'OLDJOBOLDJOBOLD1', 0, 'running', 7, 41, 1410, 1.5,"
    " 300, 0);"
    "INSERT INTO pipelines VALUES('OLDJOBOLDJOBOLD1', 0, 1, 2.5, 12);"
    "PRAGMA user_version=1;";

static int setup(void **state)
{
    (void)state;
    harness_tmpdir(dir, sizeof dir, "store");
    snprintf(db, sizeof db, "%s/old.db", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    harness_rmdir(dir);
    return 0;
}

static int exec_sql(const char *sql)
{
    sqlite3 *h = NULL;
    int rc = sqlite3_open(db, &h);
    if (rc == SQLITE_OK) rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
    sqlite3_close(h);
    return rc;
}

/* One integer from a query (-999 when it fails). */
static long long query_int(const char *sql)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    long long v = -999;
    if (sqlite3_open(db, &h) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_type(q, 0) == SQLITE_NULL ? -1000 : sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    return v;
}

static int see_job(void *ud, const store_job_row *j)
{
    store_job_row *out = ud;
    *out = *j;
    out->id = NULL; /* the strings die with the row */
    return 0;
}

static int see_precision(void *ud, long idx, double se_pct, int iterations)
{
    double *p = ud;
    if (idx == 1) {
        p[0] = se_pct;
        p[1] = iterations;
    }
    return 0;
}

typedef struct rule_list {
    store_rule_row *rows;
    int *n;
} rule_list;

static int see_rule(void *ud, const store_rule_row *r)
{
    rule_list *l = ud;
    if (*l->n < 4) l->rows[(*l->n)++] = *r;
    return 0;
}

static int see_pipe(void *ud, const store_pipe_row *p)
{
    *(store_pipe_row *)ud = *p;
    return 0;
}

static int see_latest(void *ud, int rank, long it)
{
    ((long *)ud)[rank] = it;
    return 0;
}

/* The version-1 rows as the upgraded store reads them (j and p get the job's and pipeline 0's). */
static void check_v1_rows(store *s, store_job_row *j, store_pipe_row *p)
{
    memset(j, 0, sizeof *j);
    assert_int_equal(store_each_job(s, see_job, j), 0);
    assert_int_equal(j->round, 7);
    assert_true(j->bp_measured_w == 0 && j->bp_used_w == 0);
    assert_int_equal(store_each_pipeline(s, "OLDJOBOLDJOBOLD1", see_pipe, p), 0);
    assert_int_equal(p->plan_id, 12);
    assert_int_equal(p->prev_plan_id, -1);
    assert_int_equal(p->from_iteration, 0);
    assert_true(p->pace_hz == 0); /* not known before version 4 */
    /* Before version 5 every result was a row: none folded, the newest iteration not stored. */
    assert_int_equal(p->newest, STORE_NEWEST_UNKNOWN);
    assert_int_equal(p->reports, 0);
    assert_true(p->report_time_s == 0 && p->report_energy_j == 0);
    assert_int_equal(p->epoch, 0); /* no plan rule before version 6 */
    assert_int_equal(store_count_measurements(s, "OLDJOBOLDJOBOLD1"), 1);
}

/* New values go in (j: the job's row, updated) and come back; absent ones are NULL. Closes s. */
static void put_new_values(store *s, store_job_row *j)
{
    assert_int_equal(store_begin(s), 0);
    store_meas_row m = {0, "profiling", 0, 42, 1410, 1.5, 300, 1.25, 12, 83.5, 1};
    long long id;
    assert_int_equal(store_insert_measurement(s, "OLDJOBOLDJOBOLD1", &m, &id), 0);
    store_meas_row bare = {0, "profiling", 0, 43, 1410, 1.5, 300, 0, -1, 0, 1};
    assert_int_equal(store_insert_measurement(s, "OLDJOBOLDJOBOLD1", &bare, &id), 0);
    store_pipe_row np = {0, 0, 0, 14, 12, 50, 437.5, 57, 3, 4.5, 900.25, 3};
    assert_int_equal(store_put_pipeline(s, "OLDJOBOLDJOBOLD1", &np), 0);
    for (long e = 1; e <= 3; e++) {
        store_rule_row rr = {e, e == 3 ? 1.25 : 0, 10 + e, e == 2 ? 7 : -1};
        assert_int_equal(store_put_rule(s, "OLDJOBOLDJOBOLD1", &rr), 0);
    }
    assert_int_equal(store_delete_rules(s, "OLDJOBOLDJOBOLD1", 1), 0);
    j->id = "OLDJOBOLDJOBOLD1";
    j->phase = "running";
    j->reason = "";
    j->bp_measured_w = 81.5;
    assert_int_equal(store_update_job(s, j), 0);
    assert_int_equal(store_commit(s), 0);
    long latest[1] = {-1};
    assert_int_equal(store_latest_iterations(s, "OLDJOBOLDJOBOLD1", see_latest, latest), 0);
    assert_int_equal(latest[0], 43);
    store_close(s);

    assert_int_equal(query_int("SELECT plan_id FROM measurements WHERE iteration=42"), 12);
    assert_int_equal(query_int("SELECT pace_s * 100 FROM measurements WHERE iteration=42"), 125);
    assert_int_equal(query_int("SELECT plan_id FROM measurements WHERE iteration=43"), -1000);
    assert_int_equal(query_int("SELECT pace_s FROM measurements WHERE iteration=41"), -1000);
    assert_int_equal(query_int("SELECT bp_used_w FROM jobs"), -1000);
}

/* The rules and the precision of the job, and that deleting it removes both. */
static void check_rules_and_precision(store *s)
{
    store_rule_row rules[4];
    int nrules = 0;
    assert_int_equal(store_each_rule(s, "OLDJOBOLDJOBOLD1", see_rule, &(rule_list){rules, &nrules}),
                     0);
    assert_int_equal(nrules, 2); /* rule 1 was dropped; oldest first */
    assert_true(rules[0].epoch == 2 && rules[0].slow == 12 && rules[0].cap == 7);
    assert_true(rules[1].epoch == 3 && rules[1].tprime == 1.25 && rules[1].cap == -1);
    assert_int_equal(store_put_precision(s, "OLDJOBOLDJOBOLD1", 1, 0.75, 6), 0);
    assert_int_equal(store_put_precision(s, "OLDJOBOLDJOBOLD1", 1, 0.25, 9), 0); /* replaced */
    double prec[2] = {0, 0};
    assert_int_equal(store_each_precision(s, "OLDJOBOLDJOBOLD1", see_precision, prec), 0);
    assert_true(prec[0] == 0.25 && prec[1] == 9);
    assert_int_equal(store_delete_job(s, "OLDJOBOLDJOBOLD1"), 0);
    prec[1] = 0;
    assert_int_equal(store_each_precision(s, "OLDJOBOLDJOBOLD1", see_precision, prec), 0);
    assert_true(prec[1] == 0);
    nrules = 0;
    assert_int_equal(store_each_rule(s, "OLDJOBOLDJOBOLD1", see_rule, &(rule_list){rules, &nrules}),
                     0);
    assert_int_equal(nrules, 0);
}

static void test_v1_upgrades_in_place(void **state)
{
    (void)state;
    assert_int_equal(exec_sql(V1), SQLITE_OK);
    store *s = NULL;
    prs_error err = {0, ""};
    const char *msg = err.msg;
    assert_int_equal(store_open(db, 0, &s, &err), 0);
    assert_int_equal(query_int("PRAGMA user_version"), STORE_SCHEMA_VERSION);
    /* Version 8: deleting a measurement finds its windows through an index, not a scan. */
    assert_int_equal(query_int("SELECT count(*) FROM pragma_index_list('windows') WHERE"
                               " name='windows_measurement'"),
                     1);

    store_job_row j;
    store_pipe_row p = {-1, 0, 0, 0, 0, 0, -1, 0, -1, -1, -1, -1};
    check_v1_rows(s, &j, &p);
    put_new_values(s, &j);

    /* Opening again changes nothing; a newer version is refused. */
    assert_int_equal(store_open(db, 0, &s, &err), 0);
    memset(&j, 0, sizeof j);
    assert_int_equal(store_each_job(s, see_job, &j), 0);
    assert_true(j.bp_measured_w == 81.5);
    assert_int_equal(store_each_pipeline(s, "OLDJOBOLDJOBOLD1", see_pipe, &p), 0);
    assert_int_equal(p.from_iteration, 50);
    assert_true(p.pace_hz == 437.5);
    assert_int_equal(p.newest, 57);
    assert_int_equal(p.reports, 3);
    assert_true(p.report_time_s == 4.5 && p.report_energy_j == 900.25);
    assert_int_equal(p.epoch, 3);
    check_rules_and_precision(s);
    store_close(s);
    assert_int_equal(exec_sql("PRAGMA user_version=99"), SQLITE_OK);
    assert_int_equal(store_open(db, 0, &s, &err), -1);
    assert_non_null(strstr(msg, "newer"));
}

static void test_new_database(void **state)
{
    (void)state;
    char path[320];
    snprintf(path, sizeof path, "%s/new.db", dir);
    store *s = NULL;
    prs_error err = {0, ""};
    assert_int_equal(store_open(path, 0, &s, &err), 0);
    store_close(s);
    snprintf(db, sizeof db, "%s", path);
    assert_int_equal(query_int("PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(query_int("SELECT count(*) FROM pragma_table_info('measurements')"
                               " WHERE name IN ('pace_s', 'plan_id', 'blocking_power_w')"),
                     3);
    assert_int_equal(query_int("SELECT count(*) FROM pragma_table_info('pipelines') WHERE name IN"
                               " ('newest', 'reports', 'report_time_s', 'report_energy_j')"),
                     4);
}

static int count_jobs(void *ud, const store_job_row *j)
{
    (void)j;
    (*(int *)ud)++;
    return 0;
}

/* A deleted job is marked in one statement, skipped by the job walk (a restart does not bring it
 * back) and purged in steps of at most max_rows rows each, windows first, then measurements,
 * then the rest; the other jobs' rows stay. */
static void test_purge_in_bounded_steps(void **state)
{
    (void)state;
    char path[320];
    snprintf(path, sizeof path, "%s/purge.db", dir);
    store *s = NULL;
    prs_error err = {0, ""};
    assert_int_equal(store_open(path, 0, &s, &err), 0);
    static const uint8_t hash[32] = {0};
    const char *ids[2] = {"PURGEPURGEPURGE1", "KEEPKEEPKEEPKEE2"};
    assert_int_equal(store_begin(s), 0);
    for (int k = 0; k < 2; k++) {
        store_job_row j = {ids[k], hash, "{}", "", "profiling", "", 0, 0, 0, 1, 0, 0, 0};
        assert_int_equal(store_insert_job(s, &j), 0);
        assert_int_equal(store_insert_rank(s, ids[k], 0, 0, 0, 0, "gpu"), 0);
        for (int m = 0; m < 5; m++) {
            store_meas_row row = {0, "profiling", 0, m, 1410, 1, 100, 0, -1, 0, 1};
            long long mid;
            assert_int_equal(store_insert_measurement(s, ids[k], &row, &mid), 0);
            for (int w = 0; w < 7; w++)
                assert_int_equal(store_insert_window(s, ids[k], mid, 0, 0, w, 1410, 0.1, 1, 1), 0);
        }
    }
    assert_int_equal(store_mark_deleting(s, ids[0]), 0);
    assert_int_equal(store_commit(s), 0);
    int njobs = 0;
    assert_int_equal(store_each_job(s, count_jobs, &njobs), 0);
    assert_int_equal(njobs, 1);
    store_close(s);

    /* A restart finds the deletion to finish. */
    assert_int_equal(store_open(path, 0, &s, &err), 0);
    char id[32];
    assert_int_equal(store_next_deleting(s, id), 0);
    assert_string_equal(id, ids[0]);
    long per_step[16], n = 0;
    int done = 0, steps = 0;
    while (!done && steps < 16) {
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_purge_step(s, id, 10, &n, &done), 0);
        assert_int_equal(store_commit(s), 0);
        per_step[steps++] = n;
    }
    /* 35 windows in 10, 10, 10, 5; 5 measurements; then the rest with the job's row. */
    assert_int_equal(steps, 6);
    static const long WANT[6] = {10, 10, 10, 5, 5, 0};
    for (int k = 0; k < 6; k++)
        assert_int_equal(per_step[k], WANT[k]);
    assert_int_equal(store_next_deleting(s, id), 0);
    assert_string_equal(id, "");
    assert_int_equal(store_count_measurements(s, ids[0]), 0);
    assert_int_equal(store_count_measurements(s, ids[1]), 5);
    njobs = 0;
    assert_int_equal(store_each_job(s, count_jobs, &njobs), 0);
    assert_int_equal(njobs, 1);
    store_close(s);
    snprintf(db, sizeof db, "%s", path);
    assert_int_equal(query_int("SELECT count(*) FROM windows"), 35);
    assert_int_equal(query_int("SELECT count(*) FROM ranks"), 1);
}

/* A new database gives the space of purged rows back to the file system (incremental
 * auto-vacuum), a bounded number of pages per step: its page count falls back and no free page
 * is left. */
static void test_purge_gives_space_back(void **state)
{
    (void)state;
    char path[320];
    snprintf(path, sizeof path, "%s/vacuum.db", dir);
    store *s = NULL;
    prs_error err = {0, ""};
    assert_int_equal(store_open(path, 0, &s, &err), 0);
    snprintf(db, sizeof db, "%s", path);
    assert_int_equal(query_int("PRAGMA auto_vacuum"), 2);
    long long empty = query_int("PRAGMA page_count");
    static const uint8_t hash[32] = {0};
    const char *id = "VACUUMVACUUMVAC1";
    assert_int_equal(store_begin(s), 0);
    store_job_row j = {id, hash, "{}", "", "profiling", "", 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(store_insert_job(s, &j), 0);
    for (int m = 0; m < 100; m++) {
        store_meas_row row = {0, "profiling", 0, m, 1410, 1, 100, 0, -1, 0, 1};
        long long mid;
        assert_int_equal(store_insert_measurement(s, id, &row, &mid), 0);
        for (int w = 0; w < 200; w++)
            assert_int_equal(store_insert_window(s, id, mid, 0, 0, w, 1410, 0.1, 1, 1), 0);
    }
    assert_int_equal(store_mark_deleting(s, id), 0);
    assert_int_equal(store_commit(s), 0);
    long long full = query_int("PRAGMA page_count");
    assert_true(full > empty + 100);
    long n = 0;
    int done = 0;
    while (!done) {
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_purge_step(s, id, 5000, &n, &done), 0);
        assert_int_equal(store_commit(s), 0);
    }
    long left = 0, steps = 0, last = -1;
    do {
        assert_int_equal(store_vacuum_step(s, 64, &left), 0);
        /* each step gives back pages, at most 64 */
        assert_true(last < 0 || (left < last && left >= last - 64));
        last = left;
    } while (left > 0 && ++steps < 10000);
    assert_int_equal(left, 0);
    assert_true(steps > 1);
    store_close(s);
    assert_int_equal(query_int("PRAGMA freelist_count"), 0);
    assert_true(query_int("PRAGMA page_count") < full / 2);
}

/* A 12 MB profile grows the WAL to its size; once a checkpoint has run, the next transactions
 * bring the file back to STORE_WAL_LIMIT_BYTES instead of keeping it at 12 MB. */
static void test_wal_shrinks_after_large_transaction(void **state)
{
    (void)state;
    char path[320], wal[330];
    snprintf(path, sizeof path, "%s/wal.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    store *s = NULL;
    prs_error err = {0, ""};
    assert_int_equal(store_open(path, 0, &s, &err), 0);
    static const uint8_t hash[32];
    store_job_row j = {.id = "j1",
                       .token_hash = hash,
                       .spec_json = "{}",
                       .config_key = "",
                       .phase = "profiling",
                       .reason = ""};
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_insert_job(s, &j), 0);
    assert_int_equal(store_commit(s), 0);
    size_t len = 12u << 20;
    char *csv = malloc(len);
    assert_non_null(csv);
    for (size_t i = 0; i < len; i++)
        csv[i] = (char)('a' + (i * 7919 % 26)); /* no long runs: stored as written */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_put_profile(s, "j1", "uploaded", csv, len), 0);
    assert_int_equal(store_commit(s), 0);
    free(csv);
    long long grown = harness_file_size(wal);
    assert_true(grown > (long long)len);
    /* small transactions: the automatic checkpoint after the large commit lets the WAL restart */
    for (int i = 0; i < 3; i++) {
        j.phase = i % 2 ? "profiling" : "planning";
        assert_int_equal(store_begin(s), 0);
        assert_int_equal(store_update_job(s, &j), 0);
        assert_int_equal(store_commit(s), 0);
    }
    long long after = harness_file_size(wal);
    print_message("WAL %lld B after the 12 MB profile, %lld B after 3 small transactions\n", grown,
                  after);
    assert_true(after <= STORE_WAL_LIMIT_BYTES);
    store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_upgrades_in_place),
        cmocka_unit_test(test_new_database),
        cmocka_unit_test(test_purge_in_bounded_steps),
        cmocka_unit_test(test_purge_gives_space_back),
        cmocka_unit_test(test_wal_shrinks_after_large_transaction),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
