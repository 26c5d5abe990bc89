/* Bounded planning (docs/server.md, 'Limits'), against a server running in this process:
 *   - a profile whose planning problem is too large (the frontier's span, or the planner's
 *     tables) is refused at upload with 400 naming the limit, before any planner runs (the
 *     test prints the profile's size and the tables it would need);
 *   - so is a profile with nothing to plan (every time rounds to 0 units, energies that
 *     overflow), with 400 bad_profile and the planner's reason;
 *   - at most max_planners planners run, the others wait their turn (queued, and started only
 *     after the running one was canceled: the order of the server's log lines);
 *   - complete and DELETE stop a running planner promptly: within 100 ms of the answer (the gap
 *     between the answer and the server's planning_canceled log line, whose timestamps have
 *     millisecond resolution) plus an allowance for a slow machine (allowance_s);
 *   - a planning past the time limit fails its job, naming the limit;
 *   - shutdown with a planner running takes < 1 s (plus the allowance), and the job is planned
 *     again at restart. */
#define _GNU_SOURCE /* timegm */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "perseus/planner.h"
#include "perseus/profile.h"
#include "perseus/server.h"
#include "server_harness.h"

typedef struct srv_ctx {
    prs_server *s;
    int port;
    char dir[256], db[300], log[300];
} srv_ctx;

static int start_on(srv_ctx *x, const prs_server_config *base)
{
    prs_server_config cfg = *base;
    cfg.port = 0;
    snprintf(x->db, sizeof x->db, "%s/test.db", x->dir);
    snprintf(x->log, sizeof x->log, "%s/log", x->dir);
    cfg.db_path = x->db;
    cfg.data_dir = x->dir;
    cfg.log_fd = open(x->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    cfg.threads = 2;
    prs_error err = {0, ""};
    if (prs_server_start(&cfg, &x->s, &err) != 0) {
        fprintf(stderr, "server: %s\n", err.msg);
        return -1;
    }
    x->port = prs_server_port(x->s);
    return 0;
}

static int start(srv_ctx *x, const prs_server_config *base)
{
    harness_tmpdir(x->dir, sizeof x->dir, "planning");
    return x->dir[0] ? start_on(x, base) : -1;
}

static void stop(srv_ctx *x, int rm)
{
    prs_server_stop(x->s);
    if (rm) harness_rmdir(x->dir);
}

typedef struct job_ref {
    char id[64], tok[96];
} job_ref;

/* Microbatches of a job whose planning (8 stages, 10 us unit, the profile of upload, the
 * default exp cost model) runs for seconds: 10.3 s of the same `perseus plan` on the 2-core
 * development machine (hull: 1.8 s). The tests below need a planner still running when they
 * cancel it, time it out (0.5 s) or shut down. M = 16 once took 7 s and now takes 0.86 s here,
 * close enough to the limit that test_time_limit saw its planning finish before it on a faster
 * machine. */
#define LONG_MB 96

/* A job of `stages` stages and `mb` microbatches on 8 clocks at unit time `unit`. */
static void create(srv_ctx *x, int stages, int mb, double unit, job_ref *j)
{
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"stages\":%d,\"microbatches\":%d,\"dp\":1,\"blocking_power_w\":80,"
             "\"clocks_mhz\":[1410,1350,1290,1230,1170,1110,1050,990],\"unit_time_s\":%g}",
             stages, mb, unit);
    http_reply r = http_do(x->port, "POST", "/v1/jobs", NULL, spec, strlen(spec), NULL);
    assert_int_equal(r.status, 201);
    snprintf(j->id, sizeof j->id, "%s", json_str(r.json, "job_id"));
    snprintf(j->tok, sizeof j->tok, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
}

/* A profile of `stages` stages on the clocks from 1410 MHz down to 990 in steps of `step`
 * (times ~ 1/f, energies ~ f^2 t) into csv (malloc'd), its length returned. */
static size_t make_csv(int stages, int step, char **csv)
{
    size_t cap = (size_t)stages * 2 * (420 / (size_t)step + 1) * 64 + 64;
    char *c = malloc(cap);
    assert_non_null(c);
    int n = snprintf(c, cap, "stage,instruction,frequency,time,energy\n");
    for (int s = 0; s < stages; s++)
        for (int f = 1410; f >= 990; f -= step)
            for (int in = 0; in < 2; in++) {
                double t = (in ? 0.020 : 0.010) * (1 + 0.1 * (s % 8)) * pow(1410.0 / f, 0.9);
                double e = 250 * t * (f / 1410.0) * (f / 1410.0) + 60 * t;
                n += snprintf(c + n, cap - (size_t)n, "%d,%s,%d,%.9g,%.9g\n", s,
                              in ? "backward" : "forward", f, t, e);
            }
    *csv = c;
    return (size_t)n;
}

static http_reply upload_csv(srv_ctx *x, const job_ref *j, const char *csv, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", j->id);
    return http_do(x->port, "POST", path, j->tok, csv, len, NULL);
}

/* Upload a profile for `stages` stages on the 8 clocks of create(). */
static http_reply upload(srv_ctx *x, const job_ref *j, int stages)
{
    char *csv;
    size_t n = make_csv(stages, 60, &csv);
    http_reply r = upload_csv(x, j, csv, n);
    free(csv);
    return r;
}

static json_t *status(srv_ctx *x, const job_ref *j, http_reply *r)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", j->id);
    *r = http_do(x->port, "GET", path, j->tok, NULL, 0, NULL);
    assert_int_equal(r->status, 200);
    return r->json;
}

/* Whether the job's planner has started (it reported its first progress). */
static int planner_started(srv_ctx *x, const job_ref *j)
{
    http_reply r;
    json_t *st = status(x, j, &r);
    int started = json_int(json_object_get(st, "planning"), "total") > 0;
    http_reply_free(&r);
    return started;
}

static int wait_started(srv_ctx *x, const job_ref *j, double max_s)
{
    double t0 = harness_now();
    while (harness_now() - t0 < max_s) {
        if (planner_started(x, j)) return 1;
        harness_sleep_ms(5); /* poll interval */
    }
    return 0;
}

/* Latency bounds hold on an idle machine; a busy one stretches every latency alike. The
 * allowance added to a bound: 50 times the duration of a request to the same server measured
 * right before (a few ms idle, so the bounds stay close to their figures there). */
static double allowance_s(double request_s)
{
    return 50 * request_s;
}

/* The duration of one status request of job j. */
static double request_s(srv_ctx *x, const job_ref *j)
{
    http_reply r;
    double t0 = harness_now();
    status(x, j, &r);
    double secs = harness_now() - t0;
    http_reply_free(&r);
    return secs;
}

/* The line number (from 1) of the first line of the server's log holding needle, waiting up to
 * 30 s for it; 0 if none. */
static int log_line(const srv_ctx *x, const char *needle)
{
    double t0 = harness_now();
    while (harness_now() - t0 < 30) {
        FILE *f = fopen(x->log, "r");
        char line[1024];
        int n = 0;
        while (f && fgets(line, sizeof line, f)) {
            n++;
            if (strstr(line, needle)) {
                fclose(f);
                return n;
            }
        }
        if (f) fclose(f);
        harness_sleep_ms(10); /* poll interval */
    }
    return 0;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The wall time of the first log line holding `needle`, waiting up to 30 s; -1 if none. */
static double log_time(const srv_ctx *x, const char *needle)
{
    double t0 = harness_now();
    while (harness_now() - t0 < 30) {
        FILE *f = fopen(x->log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, needle)) {
                struct tm tm;
                memset(&tm, 0, sizeof tm);
                int ms = 0;
                fclose(f);
                if (sscanf(line, "ts=%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                           &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
                    return -1;
                tm.tm_year -= 1900;
                tm.tm_mon -= 1;
                return (double)timegm(&tm) + ms / 1000.0;
            }
        if (f) fclose(f);
        harness_sleep_ms(10); /* poll interval */
    }
    return -1;
}

/* Seconds from `answered` (wall time) to the planning_canceled line of job j. */
static double cancel_latency(const srv_ctx *x, const job_ref *j, double answered)
{
    char needle[128];
    snprintf(needle, sizeof needle, "msg=planning_canceled job=%s", j->id);
    double at = log_time(x, needle);
    assert_true(at > 0);
    return at - answered;
}

static void test_refused_at_upload(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_plan_points = 1000;
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    /* The planner's tables cover every unit between a computation's fastest and slowest time:
     * 400 s in units of 1 us is 4e8 entries per computation type. */
    static const char spec[] = "{\"stages\":1,\"microbatches\":1,\"dp\":1,\"blocking_power_w\":80,"
                               "\"clocks_mhz\":[1410,1005],\"unit_time_s\":1e-6}";
    static const char csv[] = "stage,instruction,frequency,time,energy\n"
                              "0,forward,1410,0.5,100\n0,forward,1005,400,90\n"
                              "0,backward,1410,1,200\n0,backward,1005,800,180\n";
    http_reply r = http_do(x.port, "POST", "/v1/jobs", NULL, spec, strlen(spec), NULL);
    assert_int_equal(r.status, 201);
    job_ref j;
    snprintf(j.id, sizeof j.id, "%s", json_str(r.json, "job_id"));
    snprintf(j.tok, sizeof j.tok, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", j.id);
    double t0 = harness_now();
    r = http_do(x.port, "POST", path, j.tok, csv, strlen(csv), NULL);
    print_message("%zu-byte profile at 1e-6 s: HTTP %d in %.1f ms: %s\n", strlen(csv), r.status,
                  1e3 * (harness_now() - t0), r.body);
    assert_int_equal(r.status, 400);
    json_t *e = json_object_get(r.json, "error");
    assert_string_equal(json_str(e, "code"), "too_large_to_plan");
    assert_non_null(strstr(json_str(e, "message"), "--max-plan-memory"));
    http_reply_free(&r);
    /* The job did not move: still registering, no profile, no planner. */
    json_t *st = status(&x, &j, &r);
    assert_string_equal(json_str(st, "phase"), "registering");
    http_reply_free(&r);

    /* A frontier of more points than --max-plan-points: 4 stages x 8 microbatches at 0.1 ms
     * span ~1,500 units. */
    job_ref k;
    create(&x, 4, 8, 0.0001, &k);
    r = upload(&x, &k, 4);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "--max-plan-points"));
    http_reply_free(&r);
    stop(&x, 1);
}

/* Upload csv (a profile of stage 0 on two clocks, time and energy given as printf formats) to a
 * new 1-stage job at unit 1 ms: its reply. */
static http_reply upload_rows(srv_ctx *x, const char *time, const char *energy, job_ref *j)
{
    char row[64], csv[512] = "stage,instruction,frequency,time,energy\n";
    create(x, 1, 4, 0.001, j);
    static const char *const rows[] = {"0,forward,1410", "0,forward,1350", "0,backward,1410",
                                       "0,backward,1350"};
    for (int i = 0; i < 4; i++) {
        snprintf(row, sizeof row, "%s,%s,%s\n", rows[i], time, energy);
        strncat(csv, row, sizeof csv - strlen(csv) - 1);
    }
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/profile", j->id);
    return http_do(x->port, "POST", path, j->tok, csv, strlen(csv), NULL);
}

/* Refused at upload with 400 bad_profile, the message naming what is wrong; the job did not
 * move. */
static void expect_refused(srv_ctx *x, http_reply *r, const job_ref *j, const char *why)
{
    print_message("HTTP %d: %s\n", r->status, r->body);
    assert_int_equal(r->status, 400);
    json_t *e = json_object_get(r->json, "error");
    assert_string_equal(json_str(e, "code"), "bad_profile");
    assert_non_null(strstr(json_str(e, "message"), why));
    http_reply_free(r);
    json_t *st = status(x, j, r);
    assert_string_equal(json_str(st, "phase"), "registering");
    http_reply_free(r);
}

/* A profile with nothing to plan is refused at upload, as `perseus plan` refuses it, rather than
 * run on a 0-second plan (times that all round to 0 units) or fail later with "the planner
 * produced an empty frontier" (energies whose sum overflows). */
static void test_nothing_to_plan(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    job_ref j;
    http_reply r = upload_rows(&x, "1e-300", "10", &j);
    expect_refused(&x, &r, &j, "unit_time_s 0.001 s is coarser than the computations");
    r = upload_rows(&x, "0.0004", "10", &j); /* 0.4 units: rounds to 0 too */
    expect_refused(&x, &r, &j, "every time rounds to 0 units");
    /* 8 computations of 1e308 J: an iteration's energy is inf (the refusal may come from the
     * profile's own bounds, which name the energy too) */
    r = upload_rows(&x, "0.01", "1e308", &j);
    expect_refused(&x, &r, &j, "energ");
    r = upload_rows(&x, "0.01", "10", &j); /* the same job with sane figures plans */
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    stop(&x, 1);
}

/* One planner slot: the second planning waits; complete and DELETE each stop a running planner
 * within 100 ms, and the waiting one then starts. */
static void test_queue_and_cancel(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_planners = 1;
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    job_ref a, b, c;
    create(&x, 8, LONG_MB, 1e-5, &a);
    create(&x, 8, LONG_MB, 1e-5, &b);
    create(&x, 8, LONG_MB, 1e-5, &c);
    http_reply r = upload(&x, &a, 8);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_true(wait_started(&x, &a, 30));
    r = upload(&x, &b, 8);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char needle[160];
    snprintf(needle, sizeof needle, "msg=planning_queued job=%s running=1", b.id);
    assert_true(log_line(&x, needle) > 0); /* waits for the slot */
    assert_false(planner_started(&x, &b));

    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/complete", a.id);
    double slack = allowance_s(request_s(&x, &a));
    r = http_do(x.port, "POST", path, a.tok, "{}", 2, NULL);
    double answered = wall_now();
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    double lat = cancel_latency(&x, &a, answered);
    print_message("complete stopped the planner %.0f ms after its answer (allowance %.0f ms)\n",
                  lat * 1e3, slack * 1e3);
    assert_true(lat < 0.1 + slack);
    assert_true(wait_started(&x, &b, 30)); /* b took the slot, and only once a's was free */
    char canceled[160];
    snprintf(canceled, sizeof canceled, "msg=planning_canceled job=%s", a.id);
    snprintf(needle, sizeof needle, "msg=planning job=%s", b.id);
    assert_true(log_line(&x, canceled) < log_line(&x, needle));

    r = upload(&x, &c, 8); /* queued behind b */
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    snprintf(path, sizeof path, "/v1/jobs/%s", b.id);
    slack = allowance_s(request_s(&x, &b));
    r = http_do(x.port, "DELETE", path, b.tok, NULL, 0, NULL);
    answered = wall_now();
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    lat = cancel_latency(&x, &b, answered);
    print_message("DELETE stopped the planner %.0f ms after its answer (allowance %.0f ms)\n",
                  lat * 1e3, slack * 1e3);
    assert_true(lat < 0.1 + slack);
    assert_true(wait_started(&x, &c, 30));
    stop(&x, 1);
}

static void test_time_limit(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.plan_timeout_s = 0.5;
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    job_ref a;
    create(&x, 8, LONG_MB, 1e-5, &a);
    http_reply r = upload(&x, &a, 8);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    double t0 = harness_now(), slack = allowance_s(request_s(&x, &a));
    const char *phase = "planning";
    json_t *st = NULL;
    double elapsed_max = 0; /* planning.elapsed_s while planning: counts up from the start */
    for (;;) {
        st = status(&x, &a, &r);
        phase = json_str(st, "phase");
        double el = json_num(json_object_get(st, "planning"), "elapsed_s");
        if (strcmp(phase, "planning") == 0 && el > elapsed_max) elapsed_max = el;
        if (strcmp(phase, "planning") != 0 || harness_now() - t0 >= 30) break;
        http_reply_free(&r);  /* the last reply is kept for the checks below */
        harness_sleep_ms(20); /* poll interval */
    }
    double secs = harness_now() - t0;
    print_message("a planning past the 0.5 s limit: %s after %.2f s (allowance %.0f ms): %s\n",
                  phase, secs, slack * 1e3, json_str(st, "reason"));
    assert_string_equal(phase, "failed");
    assert_non_null(strstr(json_str(st, "reason"), "--plan-timeout"));
    print_message("planning.elapsed_s seen while planning: up to %.3f s\n", elapsed_max);
    assert_true(elapsed_max > 0);
    assert_true(secs < 1.5 + slack);
    http_reply_free(&r);
    stop(&x, 1);
}

static void test_shutdown(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    job_ref a;
    create(&x, 8, LONG_MB, 1e-5, &a);
    http_reply r = upload(&x, &a, 8);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_true(wait_started(&x, &a, 30));
    /* Well into its work: some of the planner's points done. */
    for (double w0 = harness_now(); harness_now() - w0 < 30; harness_sleep_ms(5)) {
        json_t *st = status(&x, &a, &r);
        int done = json_int(json_object_get(st, "planning"), "done") > 0;
        http_reply_free(&r);
        if (done) break;
    }
    double slack = allowance_s(request_s(&x, &a));
    double t0 = harness_now();
    stop(&x, 0);
    double secs = harness_now() - t0;
    print_message("shutdown with a planner running: %.3f s (allowance %.0f ms)\n", secs,
                  slack * 1e3);
    assert_true(secs < 1.0 + slack);
    /* The job was left planning, and is planned again at the next start. */
    assert_int_equal(start_on(&x, &cfg), 0);
    json_t *st = status(&x, &a, &r);
    assert_string_equal(json_str(st, "phase"), "planning");
    http_reply_free(&r);
    assert_true(wait_started(&x, &a, 30));
    stop(&x, 1);
}

/* A profile at a clock the job does not list is refused at upload, naming the row's clock
 * (it was planned, and the plans scheduled clocks the GPUs do not have). */
static void test_clocks_checked(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    static const char spec[] = "{\"stages\":1,\"microbatches\":4,\"dp\":1,\"blocking_power_w\":80,"
                               "\"clocks_mhz\":[1410,1200],\"unit_time_s\":0.001}";
    static const char bad[] = "stage,instruction,frequency,time,energy\n"
                              "0,forward,2500,0.010,10\n0,forward,700,0.020,8\n"
                              "0,backward,2500,0.020,20\n0,backward,700,0.040,16\n";
    static const char good[] = "stage,instruction,frequency,time,energy\n"
                               "0,forward,1410,0.010,10\n0,forward,1200,0.012,8\n"
                               "0,backward,1410,0.020,20\n0,backward,1200,0.024,16\n";
    http_reply r = http_do(x.port, "POST", "/v1/jobs", NULL, spec, strlen(spec), NULL);
    assert_int_equal(r.status, 201);
    job_ref j;
    snprintf(j.id, sizeof j.id, "%s", json_str(r.json, "job_id"));
    snprintf(j.tok, sizeof j.tok, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
    r = upload_csv(&x, &j, bad, strlen(bad));
    print_message("HTTP %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 400);
    json_t *e = json_object_get(r.json, "error");
    assert_string_equal(json_str(e, "code"), "bad_profile");
    assert_non_null(strstr(json_str(e, "message"), "line 2: clock 2500 MHz"));
    assert_non_null(strstr(json_str(e, "message"), "clocks_mhz (1410, 1200)"));
    http_reply_free(&r);
    r = upload_csv(&x, &j, good, strlen(good));
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    stop(&x, 1);
}

/* The planning_canceled line of job j holds `during=setup` and at least one progress call: the
 * planner stopped at a progress call of its set-up (its check or prs_plan's), before its walk
 * (the number of calls it made is printed). */
static void expect_setup_cancel(const srv_ctx *x, const job_ref *j, const char *what)
{
    char needle[160], line[1024] = "";
    snprintf(needle, sizeof needle, "msg=planning_canceled job=%s", j->id);
    assert_true(log_line(x, needle) > 0);
    FILE *f = fopen(x->log, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f) && !strstr(line, needle))
        ;
    fclose(f);
    const char *calls = strstr(line, "progress_calls=");
    print_message("%s: %.*s\n", what, calls ? (int)strcspn(calls, " \n") : 0, calls ? calls : "");
    assert_non_null(strstr(line, "during=setup"));
    assert_true(calls && atol(calls + strlen("progress_calls=")) >= 1); /* stopped at a call */
}

/* A planning of 256 stages x 1024 microbatches (524,288 computations) spends most of a second
 * setting up (the check, the schedule graph, the cost models) before its walk's first step:
 * DELETE and shutdown stop it there, at the planner's next progress call, instead of after the
 * set-up. */
static void test_cancel_setup(void **state)
{
    (void)state;
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_plan_points = 1000000;
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    char *csv;
    size_t n = make_csv(256, 420, &csv);
    job_ref a, b;
    create(&x, 256, 1024, 0.005, &a);
    create(&x, 256, 1024, 0.005, &b);
    http_reply r = upload_csv(&x, &a, csv, n);
    if (r.status != 200) print_message("HTTP %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", a.id);
    r = http_do(x.port, "DELETE", path, a.tok, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    expect_setup_cancel(&x, &a, "DELETE during set-up");

    r = upload_csv(&x, &b, csv, n);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char needle[160];
    snprintf(needle, sizeof needle, "msg=planning job=%s", b.id);
    assert_true(log_line(&x, needle) > 0);
    stop(&x, 0);
    expect_setup_cancel(&x, &b, "shutdown during set-up");
    harness_rmdir(x.dir);
    free(csv);
}

/* The planner's memory estimate for the profile of upload() on `stages` x `mb` at `unit`, as the
 * server makes it (clean frontier) with cost model `model` and `threads` picking threads. */
static double estimate_with(int stages, int mb, double unit, prs_cost_model model, int threads)
{
    char *csv;
    size_t n = make_csv(stages, 60, &csv);
    prs_profile *p = NULL;
    assert_int_equal(prs_profile_parse("profile", csv, n, &p, NULL), 0);
    free(csv);
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = (prs_pipeline){stages, mb, PRS_SCHEDULE_1F1B, unit, 80, 0, 0};
    o.frontier = PRS_FRONTIER_CLEAN;
    o.cost_model = model;
    o.threads = threads;
    prs_plan_measures m;
    assert_int_equal(prs_plan_measure(p, &o, NULL, &m, NULL), 0);
    prs_profile_free(p);
    return m.peak_bytes;
}

/* The estimate with the default cost model (exp). */
static double estimate(int stages, int mb, double unit)
{
    return estimate_with(stages, mb, unit, PRS_COST_EXP, 0);
}

/* A hull planning whose estimate fits --max-plan-memory on one picking thread but not on two
 * is planned on one (the planning_measured line says so) instead of refused. */
static void test_threads_fit(void **state)
{
    (void)state;
    double one = estimate_with(8, LONG_MB, 1e-5, PRS_COST_HULL, 1),
           two = estimate_with(8, LONG_MB, 1e-5, PRS_COST_HULL, 2);
    print_message("hull estimates: %.2f MiB on one thread, %.2f MiB on two\n", one / 1048576.0,
                  two / 1048576.0);
    assert_true(two > one);
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_plan_memory = (size_t)((one + two) / 2);
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"stages\":8,\"microbatches\":%d,\"dp\":1,\"blocking_power_w\":80,"
             "\"clocks_mhz\":[1410,1350,1290,1230,1170,1110,1050,990],\"unit_time_s\":1e-5,"
             "\"cost_model\":\"hull\"}",
             LONG_MB);
    http_reply r = http_do(x.port, "POST", "/v1/jobs", NULL, spec, strlen(spec), NULL);
    assert_int_equal(r.status, 201);
    job_ref j;
    snprintf(j.id, sizeof j.id, "%s", json_str(r.json, "job_id"));
    snprintf(j.tok, sizeof j.tok, "%s", json_str(r.json, "token"));
    http_reply_free(&r);
    r = upload(&x, &j, 8);
    if (r.status != 200) print_message("HTTP %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char needle[160];
    snprintf(needle, sizeof needle, "msg=planning_measured job=%s", j.id);
    assert_true(log_line(&x, needle) > 0);
    snprintf(needle, sizeof needle, "msg=planning_measured job=%s peak_mib=%.1f threads=1", j.id,
             one / 1048576.0);
    assert_true(log_line(&x, needle) > 0);
    stop(&x, 1);
}

/* --max-plan-memory counts the planner's whole estimate, the schedule graph included: a
 * problem whose tables are small but whose estimate is over the limit is refused at upload;
 * two that fit one at a time plan one after the other (the second waits for the memory, in the
 * order of the log lines), even with two planner slots. */
static void test_memory_budget(void **state)
{
    (void)state;
    double peak = estimate(8, LONG_MB, 1e-5), small = estimate(8, LONG_MB, 1e-3);
    print_message("estimates: %.2f MiB at 1e-5 s, %.2f MiB at 1e-3 s\n", peak / 1048576.0,
                  small / 1048576.0);
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    cfg.max_planners = 2;
    cfg.max_plan_memory = (size_t)(0.5 * small);
    srv_ctx x;
    assert_int_equal(start(&x, &cfg), 0);
    job_ref a, b;
    create(&x, 8, LONG_MB, 1e-3, &a);
    http_reply r = upload(&x, &a, 8);
    print_message("HTTP %d: %s\n", r.status, r.body);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "computations in the schedule graph"));
    assert_non_null(strstr(r.body, "--max-plan-memory"));
    http_reply_free(&r);
    stop(&x, 1);

    cfg.max_plan_memory = (size_t)(1.5 * peak);
    assert_int_equal(start(&x, &cfg), 0);
    create(&x, 8, LONG_MB, 1e-5, &a);
    create(&x, 8, LONG_MB, 1e-5, &b);
    r = upload(&x, &a, 8);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_true(wait_started(&x, &a, 30));
    r = upload(&x, &b, 8);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    char waits[160], got[160], canceled[160];
    snprintf(waits, sizeof waits, "msg=planning_waits_memory job=%s", b.id);
    assert_true(log_line(&x, waits) > 0);
    assert_false(planner_started(&x, &b));
    json_t *st = status(&x, &b, &r); /* the status says why */
    assert_true(
        json_is_true(json_object_get(json_object_get(st, "planning"), "waiting_for_memory")));
    http_reply_free(&r);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", a.id);
    r = http_do(x.port, "DELETE", path, a.tok, NULL, 0, NULL);
    assert_int_equal(r.status, 200);
    http_reply_free(&r);
    assert_true(wait_started(&x, &b, 30));
    st = status(&x, &b, &r);
    assert_true(
        json_is_false(json_object_get(json_object_get(st, "planning"), "waiting_for_memory")));
    http_reply_free(&r);
    snprintf(got, sizeof got, "msg=planning_got_memory job=%s", b.id);
    snprintf(canceled, sizeof canceled, "msg=planning_canceled job=%s", a.id);
    assert_true(log_line(&x, canceled) < log_line(&x, got));
    stop(&x, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_at_upload), cmocka_unit_test(test_nothing_to_plan),
        cmocka_unit_test(test_queue_and_cancel),  cmocka_unit_test(test_time_limit),
        cmocka_unit_test(test_shutdown),          cmocka_unit_test(test_clocks_checked),
        cmocka_unit_test(test_cancel_setup),      cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_threads_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
