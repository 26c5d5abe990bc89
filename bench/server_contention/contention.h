/* server_contention's shared declarations: the goals, the server, a plain HTTP request's answer,
 * the victim's poller, a scenario's frame, and the functions its files give one another
 * (bench/server_contention/main.c says what the program does). */
#ifndef PRS_BENCH_CONTENTION_H
#define PRS_BENCH_CONTENTION_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <sys/types.h>

#define POLL_EVERY_MS 2
#define MAX_POLLS 200000
#define GOAL_P99_MS 20.0
#define GOAL_MAX_MS 200.0

typedef struct server {
    const char *bin;
    char dir[256], db[300], log[300];
    pid_t pid;
    int port;
} server;

typedef struct reply {
    int status;
    char *body;
    int closed; /* the server closed the connection after the answer */
} reply;

typedef struct job_ref {
    char id[64], token[96];
} job_ref;

typedef struct poller {
    int port;
    job_ref v;
    volatile int stop;
    pthread_t th;
    double *lat_s;
    int n, failed, reconnects;
} poller;

typedef struct fill {
    const char *id;
    long nmeas, wins_per;
} fill;

typedef struct bench {
    server s;
    poller p;
    job_ref v;
} bench;

/* ---- util.c ---- */

double sc_now_s(void);
void sc_sleep_ms(int ms);
void sc_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
long sc_proc_kb(pid_t pid, const char *field);
long sc_count_fds(pid_t pid);
long sc_count_lines(const char *path, const char *needle, int show);
int sc_cmp_double(const void *a, const void *b);

/* ---- server.c ---- */

void sc_server_start(server *s, const char *const *extra);
void sc_server_stop(server *s);
void sc_bench_begin(bench *b, const char *bin, const char *tag, const char *const *extra);
void sc_bench_victim(bench *b, const char *create_token);
void sc_bench_end(bench *b);

/* ---- http.c ---- */

int sc_connect_port(int port);
reply sc_request(int fd, const char *method, const char *path, const char *token, const char *ctype,
                 const char *body, size_t len, int close_after);
reply sc_request1(int port, const char *method, const char *path, const char *token,
                  const char *ctype, const char *body, size_t len);
void sc_create_job(int port, const char *create_token, int stages, int microbatches, job_ref *j);
void sc_register_rank0(int port, const job_ref *j);
void sc_profiling_job(int port, job_ref *a);

/* ---- poller.c ---- */

void sc_poller_start(poller *p);
void sc_poller_report(poller *p, const char *what);

/* ---- store.c ---- */

void sc_sql_exec(sqlite3 *db, const char *sql);
void sc_fill_job(sqlite3 *db, const char *id, long nmeas, long wins_per);
void sc_fill_store(server *s, const fill *f, int nf, const char *const *extra);
long sc_rows_left(const char *dbpath, const char *id);

/* ---- the scenarios: delete.c, posts.c, upload.c, conns.c ---- */

char *sc_results_body(size_t want, long first, size_t *len);
void sc_scenario_delete_big(const char *bin);
void sc_scenario_delete_fk(const char *bin);
void sc_scenario_retention(const char *bin);
void sc_scenario_results(const char *bin);
void sc_scenario_step(const char *bin);
void sc_scenario_upload(const char *bin);
void sc_scenario_unauth(const char *bin);
void sc_scenario_flood(const char *bin, int nidle);

#endif
