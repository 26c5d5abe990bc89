/* server_contention: the upload scenario: a 15 MB profile uploaded while jobs are created. */
#define _GNU_SOURCE
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contention.h"

/* The clocks of the job a big profile goes to: the most a job may list, 512, from 1000 MHz up
 * (the server refuses a profile at clocks its job does not list). */
#define BIG_CLOCKS 512

/* A job of 8 stages x 4 microbatches at the BIG_CLOCKS clocks. */
static void create_big_job(int port, job_ref *j)
{
    char spec[8192];
    int n = snprintf(spec, sizeof spec,
                     "{\"stages\":8,\"microbatches\":4,\"dp\":1,"
                     "\"blocking_power_w\":83.64,\"clocks_mhz\":[");
    for (int f = 1000 + BIG_CLOCKS - 1; f >= 1000; f--)
        n += snprintf(spec + n, sizeof spec - (size_t)n, "%d%s", f, f > 1000 ? "," : "]}");
    reply r = sc_request1(port, "POST", "/v1/jobs", NULL, NULL, spec, (size_t)n);
    json_t *o = r.body ? json_loads(r.body, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(o, "job_id"));
    const char *tok = json_string_value(json_object_get(o, "token"));
    if (r.status != 201 || !id || !tok) sc_die("job creation answered %d: %s", r.status, r.body);
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->token, sizeof j->token, "%s", tok);
    json_decref(o);
    free(r.body);
}

/* A profile of about `want` bytes for create_big_job's job: 8 stages x 2 instructions x
 * BIG_CLOCKS clocks, the times and energies written with as many decimals as that takes. */
static char *big_profile(size_t want, size_t *len)
{
    size_t cap = want + 8192, n = 0;
    char *t = malloc(cap);
    n += (size_t)snprintf(t, cap, "stage,instruction,frequency,time,energy\n");
    int prec = (int)((want / (16 * BIG_CLOCKS) - 24) / 2);
    if (prec > 1800) prec = 1800; /* a line stays under the parser's 4096 bytes */
    for (int s = 0; s < 8; s++)
        for (int in = 0; in < 2; in++)
            for (int f = 1000; f < 1000 + BIG_CLOCKS && n + 4096 < cap; f++)
                n += (size_t)snprintf(t + n, cap - n, "%d,%s,%d,%.*f,%.*f\n", s,
                                      in ? "backward" : "forward", f, prec,
                                      (in ? 0.02 : 0.01) * (1.0 + 1000.0 / f), prec,
                                      (in ? 6.0 : 3.0) * (1.0 + f / 16000.0));
    *len = n;
    return t;
}

typedef struct uploader {
    int port;
    job_ref c;
    char *csv;
    size_t len;
    int status;
    double secs;
} uploader;

static void *upload_main(void *arg)
{
    uploader *u = arg;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", u->c.id);
    double t0 = sc_now_s();
    reply r = sc_request1(u->port, "POST", path, u->c.token, "text/csv", u->csv, u->len);
    u->secs = sc_now_s() - t0;
    u->status = r.status;
    free(r.body);
    return NULL;
}

void sc_scenario_upload(const char *bin)
{
    printf("upload: a 15 MB profile to another job while 20 jobs are created\n");
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    sc_bench_begin(&b, bin, "upload", NULL);
    sc_bench_victim(&b, NULL);
    uploader u = {b.s.port, {"", ""}, NULL, 0, 0, 0};
    create_big_job(b.s.port, &u.c);
    u.csv = big_profile(15000000, &u.len);
    sc_poller_start(&b.p);
    pthread_t th;
    pthread_create(&th, NULL, upload_main, &u);
    double t0 = sc_now_s(), worst = 0;
    for (int i = 0; i < 20; i++) {
        job_ref j;
        double c0 = sc_now_s();
        sc_create_job(b.s.port, NULL, 2, 4, &j);
        if (sc_now_s() - c0 > worst) worst = sc_now_s() - c0;
        sc_sleep_ms(50);
    }
    double created = sc_now_s() - t0;
    pthread_join(th, NULL);
    sc_sleep_ms(100);
    printf("  upload of %zu B answered %d in %.3f s; 20 creations in %.3f s (slowest %.3f s)\n",
           u.len, u.status, u.secs, created, worst);
    sc_poller_report(&b.p, "during the upload and creations");
    free(u.csv);
    sc_bench_end(&b);
    free(b.p.lat_s);
}
