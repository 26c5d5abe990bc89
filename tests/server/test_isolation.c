/* One job's heavy traffic does not stop the clients of another (docs/server.md, 'Locking'). A
 * server runs in this process with two HTTP workers; job B has one registered rank whose schedule
 * is polled every 2 ms, each poll on a new connection, as the kernel spreads them over the
 * workers, while one client posts ~1 MB result bodies to job A (profiling, every window stored)
 * in a loop, and then while an 11 MB profile is uploaded to job C (parsed, checked, stored,
 * planning started). Every poll must be answered (200) and the heavy requests must succeed; the
 * polls' latencies are printed, not judged: how long they take depends on the machine, and
 * bench/server_contention measures them against their goal. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "perseus/server.h"
#include "server_harness.h"
#include "sim_ranks.h"

#define POLL_EVERY_MS 2
#define MAX_POLLS 4096

typedef struct polls {
    double lat_s[MAX_POLLS];
    int n, failed;
} polls;

/* Poll rank 0 of job b every POLL_EVERY_MS for dur_s, or until *stop is set (when dur_s is 0). */
static void poll_for(const sim_job *b, double dur_s, const atomic_int *stop, polls *p)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=0", b->id);
    p->n = p->failed = 0;
    double end = harness_now() + dur_s;
    while (p->n < MAX_POLLS && (dur_s > 0 ? harness_now() < end : !atomic_load(stop))) {
        double t0 = harness_now();
        http_reply r = http_do(b->port, "GET", path, b->token, NULL, 0, NULL);
        p->lat_s[p->n++] = harness_now() - t0;
        if (r.status != 200) p->failed++;
        http_reply_free(&r);
        harness_sleep_ms(POLL_EVERY_MS);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(polls *p, double q)
{
    qsort(p->lat_s, (size_t)p->n, sizeof p->lat_s[0], cmp_double);
    int k = (int)(q * (p->n - 1) + 0.5);
    return p->lat_s[k];
}

/* ---- job A: a client posting ~1 MB result bodies ---- */

typedef struct poster {
    sim_job *a;
    char *body;
    size_t len;
    atomic_int stop;
    atomic_long posts, ok;
} poster;

/* One results body of about 1 MB: iterations of 64 microbatches with every window. */
static char *big_results(const sim_job *a, size_t *len)
{
    int clocks[128];
    for (int i = 0; i < 128; i++)
        clocks[i] = 1410;
    json_t *its = json_array();
    char *text = NULL;
    for (long n = 0;; n++) {
        json_array_append_new(its, sim_iteration(a, 0, n, clocks, 1, 0));
        json_t *body = json_pack("{s:i, s:O}", "rank", 0, "iterations", its);
        char *t = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!t || strlen(t) > 1000000) {
            free(t);
            break;
        }
        free(text);
        text = t;
    }
    json_decref(its);
    *len = text ? strlen(text) : 0;
    return text;
}

static void *post_loop(void *arg)
{
    poster *p = arg;
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", p->a->id);
    while (!p->stop) {
        http_reply r = http_do(p->a->port, "POST", path, p->a->token, p->body, p->len, NULL);
        p->posts++;
        p->ok += r.status == 200;
        http_reply_free(&r);
    }
    return NULL;
}

/* ---- job C: an 11 MB profile ---- */

/* Job C's clocks: the most a job may list, 512, from 1000 MHz up. */
#define C_CLOCKS 512

/* 8 stages, both instructions, the C_CLOCKS clocks of job C each: 8,192 rows of about 1.4 KB
 * (times and energies written with 700 decimals), 11-12 MB. */
static char *big_profile(size_t *len)
{
    size_t cap = 13u << 20, n = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
    n += (size_t)snprintf(t, cap, "stage,instruction,frequency,time,energy\n");
    for (int s = 0; s < 8; s++)
        for (int in = 0; in < 2; in++)
            for (int f = 1000; f < 1000 + C_CLOCKS && n + 1500 < cap; f++)
                n += (size_t)snprintf(t + n, cap - n, "%d,%s,%d,%.700f,%.700f\n", s,
                                      in ? "backward" : "forward", f,
                                      (in ? 0.02 : 0.01) * (1.0 + 1000.0 / f),
                                      (in ? 6.0 : 3.0) * (1.0 + f / 16000.0));
    *len = n;
    return t;
}

typedef struct uploader {
    sim_job *c;
    char *csv;
    size_t len;
    int status;
    double secs;
    atomic_int done;
} uploader;

static void *upload(void *arg)
{
    uploader *u = arg;
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", u->c->id);
    double t0 = harness_now();
    http_reply r = http_do(u->c->port, "POST", path, u->c->token, u->csv, u->len, NULL);
    u->secs = harness_now() - t0;
    u->status = r.status;
    if (r.status != 200) fprintf(stderr, "upload: %d %s\n", r.status, r.body ? r.body : "");
    http_reply_free(&r);
    u->done = 1;
    return NULL;
}

/* ---- the test ---- */

static void make_job(int port, json_t *spec, int stages, int microbatches, sim_job *j)
{
    assert_int_equal(sim_create(port, spec, stages, microbatches, 1, j), 201);
}

static void register_rank0(sim_job *j)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j->id);
    http_reply r =
        http_json(j->port, "POST", path, j->token,
                  json_pack("{s:i, s:i, s:i, s:i}", "rank", 0, "dp", 0, "pp", 0, "tp", 0));
    assert_true(r.status == 200 || r.status == 201);
    http_reply_free(&r);
}

static void test_isolation(void **state)
{
    (void)state;
    char dir[256], db[300];
    harness_tmpdir(dir, sizeof dir, "isolation");
    assert_true(dir[0] != '\0');
    snprintf(db, sizeof db, "%s/test.db", dir);
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.port = 0;
    cfg.db_path = db;
    cfg.data_dir = dir;
    cfg.log_fd = -1;
    cfg.threads = 2;
    cfg.max_profile_bytes = 16u << 20;
    prs_server *srv = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_server_start(&cfg, &srv, &err), 0);
    int port = prs_server_port(srv);

    /* B: two stages, so one registered rank keeps it registering; its schedule is what we poll. */
    sim_job b, a, c;
    make_job(port, sim_sweep_spec(2, 4, 1), 2, 4, &b);
    register_rank0(&b);
    /* A: one rank that profiles 7 clocks for up to 1,000 iterations each. */
    json_t *spec_a = sim_sweep_spec(1, 64, 1);
    json_object_set_new(json_object_get(spec_a, "profiling"), "iterations_per_clock",
                        json_integer(1000));
    make_job(port, spec_a, 1, 64, &a);
    register_rank0(&a);
    json_t *spec_c = sim_sweep_spec(8, 4, 1), *clocks = json_array();
    for (int f = 1000 + C_CLOCKS - 1; f >= 1000; f--)
        json_array_append_new(clocks, json_integer(f));
    json_object_set_new(spec_c, "clocks_mhz", clocks); /* those of its profile */
    make_job(port, spec_c, 8, 4, &c);

    static polls busy, up;
    poster p = {&a, NULL, 0, 0, 0, 0};
    p.body = big_results(&a, &p.len);
    assert_non_null(p.body);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, post_loop, &p), 0);
    /* Poll until at least 3 posts were accepted (at most 60 s). */
    for (double t0 = harness_now(); p.ok < 3 && harness_now() - t0 < 60;) {
        poll_for(&b, 0.5, NULL, &busy);
        assert_int_equal(busy.failed, 0);
    }
    p.stop = 1;
    pthread_join(th, NULL);
    print_message("during posts of %zu B to another job (%ld accepted): %d polls, p50 %.3f ms, "
                  "p99 %.3f ms, max %.3f ms\n",
                  p.len, p.ok, busy.n, 1e3 * quantile(&busy, 0.5), 1e3 * quantile(&busy, 0.99),
                  1e3 * quantile(&busy, 1.0));
    free(p.body);
    assert_true(p.ok >= 3);
    assert_int_equal(p.posts, p.ok);

    uploader u = {&c, NULL, 0, 0, 0, 0};
    u.csv = big_profile(&u.len);
    assert_non_null(u.csv);
    assert_true(u.len > 11000000);
    assert_int_equal(pthread_create(&th, NULL, upload, &u), 0);
    poll_for(&b, 0, &u.done, &up);
    pthread_join(th, NULL);
    free(u.csv);
    assert_int_equal(up.failed, 0);
    double upmax = quantile(&up, 1.0);
    print_message("during an upload of %zu B (answered %d in %.3f s): %d polls, max %.3f ms\n",
                  u.len, u.status, u.secs, up.n, 1e3 * upmax);
    assert_int_equal(u.status, 200);

    prs_server_stop(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_isolation)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
