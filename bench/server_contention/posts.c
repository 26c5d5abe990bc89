/* server_contention: the scenarios of results posts: results (~1 MB bodies in a loop) and step
 * (either side of 64 KiB). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contention.h"

/* About `want` bytes of results (whole iterations: 13 kB each), iterations numbered from
 * first: one rank with 64 microbatches of windows each. */
char *sc_results_body(size_t want, long first, size_t *len)
{
    size_t cap = want + 100000, n = 0;
    char *t = malloc(cap);
    n += (size_t)snprintf(t, cap, "{\"rank\":0,\"iterations\":[");
    for (long it = first; n + 13100 < want; it++) {
        n += (size_t)snprintf(t + n, cap - n,
                              "%s{\"iteration\":%ld,\"time_s\":1.5,\"energy_j\":300.0,"
                              "\"clock_mhz\":1410,\"windows\":[",
                              it > first ? "," : "", it);
        for (int w = 0; w < 128 && n + 200 < cap; w++)
            n += (size_t)snprintf(t + n, cap - n,
                                  "%s{\"instruction\":\"%s\",\"microbatch\":%d,\"clock_mhz\":1410,"
                                  "\"time_s\":0.0117,\"energy_j\":2.34}",
                                  w ? "," : "", w & 1 ? "backward" : "forward", w / 2);
        n += (size_t)snprintf(t + n, cap - n, "]}");
    }
    n += (size_t)snprintf(t + n, cap - n, "]}");
    *len = n;
    return t;
}

static char *big_results(size_t *len)
{
    return sc_results_body(1013000, 0, len);
}

typedef struct poster {
    int port;
    job_ref a;
    char *body;
    size_t len;
    volatile int stop;
    long posts, ok;
} poster;

static void *post_main(void *arg)
{
    poster *p = arg;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", p->a.id);
    while (!p->stop) {
        reply r = sc_request1(p->port, "POST", path, p->a.token, NULL, p->body, p->len);
        p->posts++;
        p->ok += r.status == 200;
        free(r.body);
    }
    return NULL;
}

/* Answer times of results posts just under and over 64 KiB (the size from which a request is
 * handed to the pool), 20 each, alone on the server: the median and maximum of each. */
void sc_scenario_step(const char *bin)
{
    printf("step: results posts of ~47 kB and ~71 kB (either side of 64 KiB), 20 each\n");
    bench b = {0};
    sc_bench_begin(&b, bin, "step", NULL);
    job_ref a;
    sc_profiling_job(b.s.port, &a);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", a.id);
    long it = 0;
    for (int big = 0; big < 2; big++) {
        double lat[20];
        size_t len = 0;
        for (int k = 0; k < 20; k++) {
            char *body = sc_results_body(big ? 80000 : 55000, it, &len);
            it += big ? 6 : 4;
            double t0 = sc_now_s();
            reply r = sc_request1(b.s.port, "POST", path, a.token, NULL, body, len);
            lat[k] = sc_now_s() - t0;
            if (r.status != 200) sc_die("results answered %d: %s", r.status, r.body);
            free(r.body);
            free(body);
        }
        qsort(lat, 20, sizeof lat[0], sc_cmp_double);
        printf("  %zu B: median %.1f ms, max %.1f ms\n", len, 1e3 * lat[10], 1e3 * lat[19]);
    }
    sc_bench_end(&b);
}

void sc_scenario_results(const char *bin)
{
    printf("results: ~1 MB results posts to another job for 2 s\n");
    bench b = {0};
    b.p.lat_s = calloc(MAX_POLLS, sizeof(double));
    sc_bench_begin(&b, bin, "results", NULL);
    sc_bench_victim(&b, NULL);
    poster p = {b.s.port, {"", ""}, NULL, 0, 0, 0, 0};
    sc_profiling_job(b.s.port, &p.a);
    p.body = big_results(&p.len);
    sc_poller_start(&b.p);
    pthread_t th;
    pthread_create(&th, NULL, post_main, &p);
    sc_sleep_ms(2000);
    p.stop = 1;
    pthread_join(th, NULL);
    printf("  %ld posts of %zu B, %ld accepted\n", p.posts, p.len, p.ok);
    sc_poller_report(&b.p, "during the posts");
    free(p.body);
    sc_bench_end(&b);
    free(b.p.lat_s);
}
