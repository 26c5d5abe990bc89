/* The client's background thread: every talk with perseusd (docs/api.md) happens here, never on
 * the training thread.
 *
 * One loop, one cycle every poll_interval_s: register the rank until the server accepts it, post
 * the queued iterations (oldest first, up to 256 per request and all of one round, since a post
 * carries one round), then fetch the schedule and publish it when it changed. One libcurl easy
 * handle is reused, so the connection is kept alive. An iteration leaves the queue only when the
 * server acknowledged it (200) or refused it for good (4xx: the job moved to a phase without
 * results, or the body was wrong); no answer or a 5xx keeps it for the next cycle, so an
 * unreachable or restarting server loses nothing while the queue has room. A 404 not_registered
 * (a server that lost its state) makes the rank register again. On stop, one last cycle posts
 * what is queued, within flush_timeout_s. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "perseus/clock.h"
#include "perseus/logfmt.h"
#include "client_int.h"

#define MAX_ITERATIONS_PER_POST 256
#define MAX_WINDOWS_PER_POST 65536

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void prs__client_global_init(void)
{
    pthread_once(&curl_once, curl_init_once);
}

void prs__client_schedule_free(prs__client_schedule *s)
{
    free(s->clocks);
    s->clocks = NULL;
    s->n = 0;
}

void prs__client_iteration_free(prs__client_iteration *it)
{
    free(it->windows);
    it->windows = NULL;
}

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    buf *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

/* One request. Returns the HTTP status (0: no answer); *reply (may be NULL) gets the parsed JSON
 * body (new reference) or NULL. */
static long http(CURL *h, const prs_client *c, const char *method, const char *path,
                 const char *body, double timeout_s, json_t **reply)
{
    if (reply) *reply = NULL;
    char url[1024], auth[192];
    snprintf(url, sizeof url, "%s%s", c->url, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    struct curl_slist *hdr = NULL;
    if (c->token[0]) hdr = curl_slist_append(hdr, auth);
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    buf b = {NULL, 0, 0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* https://: libcurl verifies the server's certificate and name, against ca_file if given. */
    if (c->opts.ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, c->opts.ca_file);
    long ms = (long)(timeout_s * 1000);
    if (ms < 1) ms = 1;
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    }
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    if (reply && status && b.p) *reply = json_loadb(b.p, b.len, 0, NULL);
    free(b.p);
    return status;
}

static const char *err_message(json_t *j)
{
    json_t *e = json_object_get(j, "error");
    json_t *m = e ? json_object_get(e, "message") : NULL;
    return json_is_string(m) ? json_string_value(m) : "no message";
}

int prs__client_create_job(prs_client *c, prs_error *err)
{
    json_error_t je;
    json_t *spec = json_loads(c->opts.job_spec_json, 0, &je);
    if (!spec) return prs_error_set(err, PRS_EINVAL, "job spec: %s", je.text);
    json_decref(spec);
    CURL *h = curl_easy_init();
    if (!h) return prs_error_set(err, PRS_ENOMEM, "cannot start libcurl");
    json_t *reply;
    char why[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, why);
    long st = http(h, c, "POST", "/v1/jobs", c->opts.job_spec_json, c->opts.http_timeout_s, &reply);
    curl_easy_cleanup(h);
    int rc = 0;
    if (st != 201) {
        /* An empty reply to plain HTTP is what a TLS server gives: say so. */
        int plain = strncmp(c->url, "http://", 7) == 0;
        rc = st ? prs_error_set(err, PRS_ESERVER, "creating the job: HTTP %ld: %s", st,
                                err_message(reply))
                : prs_error_set(err, PRS_ESERVER, "creating the job: no answer from %s: %s%s",
                                c->url, why[0] ? why : "no detail",
                                plain && strstr(why, "Empty reply")
                                    ? " (does the server expect https://?)"
                                    : "");
    } else {
        json_t *id = json_object_get(reply, "job_id"), *tok = json_object_get(reply, "token");
        if (!json_is_string(id) || !json_is_string(tok) ||
            strlen(json_string_value(id)) >= sizeof c->job_id ||
            strlen(json_string_value(tok)) >= sizeof c->token)
            rc = prs_error_set(err, PRS_ESERVER, "creating the job: unexpected answer");
        else {
            snprintf(c->job_id, sizeof c->job_id, "%s", json_string_value(id));
            snprintf(c->token, sizeof c->token, "%s", json_string_value(tok));
        }
    }
    json_decref(reply);
    return rc;
}

static void note_answer(prs_client *c, long status)
{
    pthread_mutex_lock(&c->mu);
    if (status)
        c->stats.last_contact_s = prs_mono_s();
    else
        c->stats.http_failures++;
    pthread_mutex_unlock(&c->mu);
}

void prs__client_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    prs_logfmt_write(2, level, fmt, ap);
    va_end(ap);
}

/* The server refused the rank for good: remembered for the hooks to return (PRS_ESERVER with
 * these words: prs_client_errmsg), and logged once on stderr, since a training loop that ignores
 * return codes would otherwise run on at the default clocks without a word. */
static void refuse(prs_client *c, long status, json_t *reply)
{
    char msg[PRS_ERRMSG_MAX];
    json_t *e = json_object_get(reply, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    snprintf(msg, sizeof msg,
             "perseusd refused rank %d of job %s: HTTP %ld%s%s: %s (check the job id and token "
             "the rank was given)",
             c->opts.rank, c->job_id, status, code ? " " : "", code ? code : "",
             err_message(reply));
    for (char *q = msg; *q; q++)
        if (*q == '"') *q = '\'';
    snprintf(c->refused_msg, sizeof c->refused_msg, "%s", msg);
    atomic_store_explicit(&c->refused, PRS_ESERVER, memory_order_release);
    prs__client_log("error", "msg=\"%s\"", msg);
}

/* 1 registered, 0 not yet (no answer, or the server busy), -1 never (refused: refuse()). */
static int do_register(CURL *h, prs_client *c)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", c->job_id);
    json_t *body = json_pack("{s:i, s:i, s:i, s:i, s:s}", "rank", c->opts.rank, "dp", c->opts.dp,
                             "pp", c->opts.pp, "tp", c->opts.tp, "gpu", prs_gpu_name(c->gpu));
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) return 0;
    json_t *reply = NULL;
    long st = http(h, c, "POST", path, text, c->opts.http_timeout_s, &reply);
    free(text);
    note_answer(c, st);
    int rc = st == 200 || st == 201 ? 1 : 0;
    /* An unknown job (404) cannot become known: a wrong id, or a job deleted or expired. */
    if (st == 400 || st == 401 || st == 403 || st == 404 || st == 409) {
        refuse(c, st, reply);
        rc = -1;
    }
    json_decref(reply);
    return rc;
}

static json_t *window_json(const prs__client_window *w)
{
    json_t *o = json_pack("{s:s, s:i, s:i, s:f, s:f}", "instruction", prs_instr_name(w->instr),
                          "microbatch", w->microbatch, "clock_mhz", w->clock_mhz, "time_s",
                          w->time_s, "energy_j", w->energy_j);
    if (o && w->chunk >= 0) json_object_set_new(o, "chunk", json_integer(w->chunk));
    return o;
}

static json_t *iteration_json(const prs__client_iteration *it)
{
    json_t *o = json_pack("{s:I, s:f, s:f, s:i}", "iteration", (json_int_t)it->iteration, "time_s",
                          it->time_s, "energy_j", it->energy_j, "clock_mhz", it->clock_mhz);
    if (!o) return NULL;
    if (it->pace_s > 0 && isfinite(it->pace_s))
        json_object_set_new(o, "pace_s", json_real(it->pace_s));
    if (it->plan_id >= 0) json_object_set_new(o, "plan_id", json_integer(it->plan_id));
    if (it->wall_s > 0 && isfinite(it->wall_s))
        json_object_set_new(o, "wall_s", json_real(it->wall_s));
    if (it->blocking_power_w > 0 && isfinite(it->blocking_power_w))
        json_object_set_new(o, "blocking_power_w", json_real(it->blocking_power_w));
    if (it->fit_rel_se > 0 && isfinite(it->fit_rel_se))
        json_object_set_new(o, "fit_rel_se", json_real(it->fit_rel_se));
    if (it->fit_rel_se > 0 && isfinite(it->fit_rel_se) && it->fit_criterion > 0)
        json_object_set_new(o, "fit_criterion", json_real(it->fit_criterion));
    if (it->n_windows == 0) return o;
    json_t *ws = json_array();
    for (int i = 0; i < it->n_windows; i++) {
        const prs__client_window *w = &it->windows[i];
        if (!(w->time_s > 0) || !(w->energy_j > 0)) continue; /* the server refuses those */
        json_array_append_new(ws, window_json(w));
    }
    json_object_set_new(o, "windows", ws);
    return o;
}

/* Post queued iterations until the queue is empty, the server does not answer, or deadline
 * (CLOCK_MONOTONIC) passes. Returns 0, or -1 when the rank must register again. */
static int post_queue(CURL *h, prs_client *c, double deadline)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", c->job_id);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int head = c->q_head, len = c->q_len;
        pthread_mutex_unlock(&c->mu);
        if (len == 0) return 0;
        /* Entries [head, head + len) are ours to read: the hooks only append behind them. */
        int q = c->opts.max_queue, k = 0, windows = 0;
        long round = c->queue[head].round;
        json_t *its = json_array();
        while (k < len && k < MAX_ITERATIONS_PER_POST) {
            const prs__client_iteration *it = &c->queue[(head + k) % q];
            if (it->round != round || windows + it->n_windows > MAX_WINDOWS_PER_POST) break;
            windows += it->n_windows;
            json_array_append_new(its, iteration_json(it));
            k++;
        }
        long clock_failures = atomic_load_explicit(&c->clock_failures, memory_order_relaxed) +
                              prs_clockctl_failures(c->ctl);
        json_t *body =
            json_pack("{s:i, s:I, s:o, s:I}", "rank", c->opts.rank, "round", (json_int_t)round,
                      "iterations", its, "clock_failures", (json_int_t)clock_failures);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!text) return 0;
        double left = deadline - prs_mono_s();
        double timeout = left < c->opts.http_timeout_s ? left : c->opts.http_timeout_s;
        long st = timeout > 0 ? http(h, c, "POST", path, text, timeout, NULL) : 0;
        free(text);
        note_answer(c, st);
        if (st == 0 || st >= 500) return 0; /* keep them for the next cycle */
        if (st == 404) {
            /* Not registered (or the job is unknown): register again, keep the iterations. */
            return -1;
        }
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < k; i++)
            prs__client_iteration_free(&c->queue[(head + i) % q]);
        c->q_head = (head + k) % q;
        c->q_len -= k;
        if (st == 200)
            c->stats.posted += k;
        else
            c->stats.dropped += k;
        pthread_mutex_unlock(&c->mu);
        if (prs_mono_s() > deadline) return 0;
    }
}

/* The pipeline's geometry, when the server sends it (s->has_pipe). */
static void parse_geometry(json_t *r, prs__client_schedule *s)
{
    json_t *kind = json_object_get(r, "schedule"), *st = json_object_get(r, "stages"),
           *mb = json_object_get(r, "microbatches"), *v = json_object_get(r, "virtual_stages");
    memset(&s->pipe, 0, sizeof s->pipe);
    s->has_pipe = 0;
    if (!json_is_string(kind) || !json_is_integer(st) || !json_is_integer(mb)) return;
    if (prs_schedule_parse(json_string_value(kind), &s->pipe.schedule)) return;
    json_int_t stages = json_integer_value(st), micro = json_integer_value(mb);
    json_int_t vs = json_is_integer(v) ? json_integer_value(v) : 1;
    if (stages < 1 || stages > 65536 || micro < 1 || micro > 1000000 || vs < 1 || vs > 1024) return;
    s->pipe.stages = (int)stages;
    s->pipe.microbatches = (int)micro;
    s->pipe.virtual_stages = (int)vs;
    s->pipe.unit_time_s = 1e-3;
    s->has_pipe = prs_pipeline_check(&s->pipe, NULL) == 0 &&
                  (double)stages * (double)micro * (double)vs < 1e8;
}

/* Field by field: the struct has padding, so its bytes are no fit for memcmp. The doubles are
 * set only from constants (parse_geometry), so == on them is exact. */
static int same_pipeline(const prs_pipeline *a, const prs_pipeline *b)
{
    return a->stages == b->stages && a->microbatches == b->microbatches &&
           a->schedule == b->schedule && a->unit_time_s == b->unit_time_s &&
           a->blocking_power_w == b->blocking_power_w && a->virtual_stages == b->virtual_stages;
}

/* Take the schedule r (a JSON object, released here) as c->latest when it is well-formed. */
static void install_schedule(prs_client *c, json_t *r)
{
    prs__client_schedule s;
    memset(&s, 0, sizeof s);
    json_t *phase = json_object_get(r, "phase"), *round = json_object_get(r, "round"),
           *plan = json_object_get(r, "plan_id"), *clocks = json_object_get(r, "clocks_mhz");
    if (!json_is_string(phase) || !json_is_integer(round) || !json_is_array(clocks)) {
        json_decref(r);
        return;
    }
    snprintf(s.phase, sizeof s.phase, "%s", json_string_value(phase));
    s.round = (long)json_integer_value(round);
    s.plan_id = json_is_integer(plan) ? (long)json_integer_value(plan) : -1;
    json_t *warm = json_object_get(r, "warmup_iterations"), *its = json_object_get(r, "iterations");
    if (json_is_integer(warm) && json_is_integer(its) && json_integer_value(warm) >= 0 &&
        json_integer_value(its) > 0 && json_integer_value(warm) + json_integer_value(its) < 1000000)
        s.quota = (int)(json_integer_value(warm) + json_integer_value(its));
    parse_geometry(r, &s);
    json_t *from = json_object_get(r, "from_iteration");
    s.from_iteration = json_is_integer(from) && json_integer_value(from) >= 0
                           ? (long)json_integer_value(from)
                           : -1;
    s.n = (int)json_array_size(clocks);
    s.clocks = s.n ? malloc(sizeof(int) * (size_t)s.n) : NULL;
    if (s.n && !s.clocks) {
        json_decref(r);
        return;
    }
    for (int i = 0; i < s.n; i++) {
        json_t *v = json_array_get(clocks, (size_t)i);
        s.clocks[i] = json_is_integer(v) ? (int)json_integer_value(v) : 0;
    }
    json_decref(r);
    pthread_mutex_lock(&c->mu);
    int same = strcmp(s.phase, c->latest.phase) == 0 && s.round == c->latest.round &&
               s.plan_id == c->latest.plan_id && s.n == c->latest.n && s.quota == c->latest.quota &&
               s.from_iteration == c->latest.from_iteration && s.has_pipe == c->latest.has_pipe &&
               same_pipeline(&s.pipe, &c->latest.pipe) &&
               (s.n == 0 || memcmp(s.clocks, c->latest.clocks, sizeof(int) * (size_t)s.n) == 0);
    if (!same) {
        prs__client_schedule_free(&c->latest);
        c->latest = s;
        s.clocks = NULL;
        atomic_fetch_add_explicit(&c->latest_version, 1, memory_order_release);
    }
    pthread_mutex_unlock(&c->mu);
    free(s.clocks);
}

static void fetch_schedule(CURL *h, prs_client *c, int *must_register)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=%d", c->job_id, c->opts.rank);
    json_t *r;
    long st = http(h, c, "GET", path, NULL, c->opts.http_timeout_s, &r);
    if (st == 404) *must_register = 1;
    if (st != 200 || !json_is_object(r)) {
        note_answer(c, st);
        json_decref(r);
        return;
    }
    /* An answer counts as contact once its schedule is taken (last_contact_s then tells that
     * everything the server said up to that instant is in c->latest). */
    install_schedule(c, r);
    note_answer(c, st);
}

void *prs__client_thread_main(void *arg)
{
    prs_client *c = arg;
    CURL *h = curl_easy_init();
    int registered = 0; /* 1 yes, -1 refused for good */
    for (int stopping = 0; !stopping;) {
        pthread_mutex_lock(&c->mu);
        if (!c->stop) {
            struct timespec until = prs_mono_timespec(prs_mono_s() + c->opts.poll_interval_s);
            pthread_cond_timedwait(&c->cv, &c->mu, &until);
        }
        stopping = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (!h) continue;
        double deadline =
            prs_mono_s() +
            (stopping ? c->opts.flush_timeout_s : c->opts.poll_interval_s + c->opts.http_timeout_s);
        if (registered == 0) {
            registered = do_register(h, c);
            pthread_mutex_lock(&c->mu);
            c->stats.registered = registered == 1;
            pthread_mutex_unlock(&c->mu);
        }
        if (registered != 1) continue;
        int must_register = post_queue(h, c, deadline) < 0;
        if (!stopping) fetch_schedule(h, c, &must_register);
        if (must_register) registered = 0;
    }
    if (h) curl_easy_cleanup(h);
    return NULL;
}
