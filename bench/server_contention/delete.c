/* server_contention: the scenarios that remove a large store: delete-big, delete-fk, retention. */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "contention.h"

/* DELETE job d while V is polled; then wait until its rows are gone from the store. */
static void delete_and_watch(bench *b, const job_ref *d, const char *what)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", d->id);
    b->p.port = b->s.port;
    sc_poller_start(&b->p);
    sc_sleep_ms(200);
    double t0 = sc_now_s();
    reply r = sc_request1(b->s.port, "DELETE", path, d->token, NULL, NULL, 0);
    double answered = sc_now_s() - t0, gone = -1;
    for (double dl = sc_now_s() + 300; sc_now_s() < dl; sc_sleep_ms(20))
        if (sc_rows_left(b->s.db, d->id) == 0) {
            gone = sc_now_s() - t0;
            break;
        }
    sc_sleep_ms(200);
    printf("  DELETE %s answered %d in %.3f s; its rows gone from the store after %.3f s\n", what,
           r.status, answered, gone);
    free(r.body);
    sc_poller_report(&b->p, "during the delete and the purge");
}

void sc_scenario_delete_big(const char *bin)
{
    printf("delete-big: DELETE of a job of 1,000 measurements x 1,000 windows\n");
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    sc_bench_begin(&b, bin, "delbig", NULL);
    sc_bench_victim(&b, NULL);
    job_ref d;
    sc_create_job(b.s.port, NULL, 2, 4, &d);
    fill f[] = {{d.id, 1000, 1000}};
    sc_fill_store(&b.s, f, 1, NULL);
    delete_and_watch(&b, &d, "(1 M windows)");
    sc_bench_end(&b);
    free(b.p.lat_s);
}

void sc_scenario_delete_fk(const char *bin)
{
    printf("delete-fk: DELETE of a job of 1,000 measurements while another holds 300,000 "
           "windows\n");
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    sc_bench_begin(&b, bin, "delfk", NULL);
    sc_bench_victim(&b, NULL);
    job_ref d, h;
    sc_create_job(b.s.port, NULL, 2, 4, &d);
    sc_create_job(b.s.port, NULL, 2, 4, &h);
    fill f[] = {{h.id, 300, 1000}, {d.id, 1000, 10}};
    sc_fill_store(&b.s, f, 2, NULL);
    delete_and_watch(&b, &d, "(1,000 measurements)");
    sc_bench_end(&b);
    free(b.p.lat_s);
}

void sc_scenario_retention(const char *bin)
{
    printf("retention: 60 finished jobs of 10,000 windows each expire\n");
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    static const char *const ret[] = {"--retention", "3s", NULL};
    sc_bench_begin(&b, bin, "retention", ret);
    sc_bench_victim(&b, NULL);
    enum { NJOBS = 60 };
    static job_ref js[NJOBS];
    fill f[NJOBS];
    for (int i = 0; i < NJOBS; i++) {
        sc_create_job(b.s.port, NULL, 2, 4, &js[i]);
        f[i] = (fill){js[i].id, 100, 100};
    }
    /* Stop, fill and mark finished a few seconds from now, so they expire while V is polled. */
    sc_server_stop(&b.s);
    sqlite3 *db = NULL;
    if (sqlite3_open(b.s.db, &db) != SQLITE_OK) sc_die("open");
    sc_sql_exec(db, "BEGIN");
    for (int i = 0; i < NJOBS; i++)
        sc_fill_job(db, f[i].id, f[i].nmeas, f[i].wins_per);
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE jobs SET phase='done', finished_unix=%lld WHERE id<>'%s'",
             (long long)time(NULL) + 2, b.v.id);
    sc_sql_exec(db, sql);
    sc_sql_exec(db, "COMMIT");
    sqlite3_close(db);
    sc_server_start(&b.s, ret);
    b.p.port = b.s.port;
    sc_poller_start(&b.p);
    double t0 = sc_now_s(), gone = -1;
    for (double dl = sc_now_s() + 120; sc_now_s() < dl; sc_sleep_ms(20))
        if (sc_rows_left(b.s.db, js[NJOBS - 1].id) == 0 && sc_rows_left(b.s.db, js[0].id) == 0) {
            gone = sc_now_s() - t0;
            break;
        }
    sc_sleep_ms(200);
    printf("  60 jobs (600,000 windows) expired and purged %.3f s after the restart\n", gone);
    sc_poller_report(&b.p, "from the restart until the purge ended");
    sc_bench_end(&b);
    free(b.p.lat_s);
}
