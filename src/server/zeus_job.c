/* The Zeus jobs behind perseusd's Zeus-compatible routes (zeus_job.h).
 *
 * A Zeus job is an ordinary v1 job of the same server, driven through its HTTP API (libcurl on
 * loopback, from the routes' one thread, never from an HTTP worker): profiling, planning,
 * stragglers, power caps and the store behave as for any v1 client, and the v1 job can be
 * watched and steered with its token like any other (the token stays in this table; the v1 job's
 * model name says which Zeus job it backs).
 *
 * What the translation adds:
 * - Clocks come with each rank, not with the job, so the v1 job is created once all ranks are in
 *   (and, for the artifact's clients, after its warm-up rounds, which also tell how many
 *   iterations a client runs per schedule: the v1 job profiles each clock for one such round,
 *   its first iteration dropped as warm-up).
 * - The schedule barrier: a rank's GET /schedule waits until every rank of the job asked; then
 *   each gets its v1 schedule, reshaped (zeus_wire.c).
 * - Results: per-instruction arrays become v1 iterations numbered per rank from 0.
 * - End of profiling: with --zeus-profile-only, or once the v1 job is done or failed, a schedule
 *   is HTTP 500 with "[profiling-done]" in its detail, which the artifact's clients take as the
 *   end of training.
 * - Master's clients post no results: their job plans from the profile perseusd was given
 *   (--zeus-profile), uploaded to the v1 job, and their one schedule waits for the plan. */
#include "zeus_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "perseus/clock.h"
#include "request.h"
#include "secure.h"
#include "zeus_wire.h"

#define ZEUS_WARMUP_ROUNDS 2  /* rounds at the highest clock before profiling, as the artifact */
#define ZEUS_MAX_JOBS 256     /* Zeus jobs held at once */
#define ZEUS_MAX_RANKS 262144 /* ranks of all Zeus jobs together (as --max-ranks' default) */
#define ZEUS_POLL_S 0.1       /* how often a job waiting for its plan looks at its v1 job */

typedef struct zrank {
    int registered;
    long dp, pp, tp;
    unsigned char *sched; /* the artifact's pipe schedule; NULL for master's */
    size_t nsched;
    long next_iteration;
    long *served_mhz; /* what the last schedule gave each computation (2M) */
    long served_round;
    int waiting; /* in the barrier */
} zrank;

typedef struct zjob {
    char id[256];
    int dialect; /* 0 unknown, 1 artifact, 2 master */
    zw_job info;
    long clocks_mhz[ZW_MAX_CLOCKS];
    size_t nclocks;
    zrank *ranks;
    long *slot_rank; /* the rank registered in each (dp, pp, tp) slot, -1: none */
    long registered;
    zeus_req *waiting; /* the barrier */
    long nwaiting;
    long round;       /* barriers released */
    long round_iters; /* iterations a rank ran per schedule, from the warm-up rounds */
    char v1_id[64], token[128];
    int awaiting_plan;           /* master's: the barrier waits for the v1 job to run */
    char failed[PRS_ERRMSG_MAX]; /* why the v1 job could not be set up; "" while it could */
    double polled;
    struct zjob *next;
} zjob;

struct zeus_jobs {
    prs_server_config cfg;
    char *base, *create_token, *profile_csv;
    size_t profile_len;
    CURL *curl;
    zjob *jobs;
    long njobs, nranks;
};

/* ---- the v1 API, over HTTP ---- */

typedef struct buf {
    char *p;
    size_t n;
} buf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    buf *b = ud;
    size_t n = size * nmemb;
    if (b->n + n > (64u << 20)) return 0;
    char *p = realloc(b->p, b->n + n + 1);
    if (!p) return 0;
    memcpy(p + b->n, data, n);
    b->p = p;
    b->n += n;
    p[b->n] = '\0';
    return n;
}

/* One v1 call: method on path with a JSON body (or text of ctype), the job's token (NULL: the
 * creation token if any). The status (0: no answer), and the answer as JSON in *out (NULL when
 * none or not JSON). */
static int v1(zeus_jobs *t, const char *method, const char *path, const char *token,
              const char *ctype, const char *body, size_t len, json_t **out)
{
    char url[512], auth[256], ct[64];
    snprintf(url, sizeof url, "%s%s", t->base, path);
    buf b = {NULL, 0};
    CURL *c = t->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* Ourselves on loopback: the certificate names the public host, not 127.0.0.1. */
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    struct curl_slist *h = NULL;
    const char *tok = token ? token : t->create_token;
    if (tok) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
        h = curl_slist_append(h, auth);
    }
    if (body) {
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        h = curl_slist_append(h, ct);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    *out = b.p ? json_loadb(b.p, b.n, 0, NULL) : NULL;
    free(b.p);
    return (int)status;
}

/* v1 with a JSON body (stolen). */
static int v1_json(zeus_jobs *t, const char *method, const char *path, const char *token,
                   json_t *body, json_t **out)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    int st = v1(t, method, path, token, "application/json", text, text ? strlen(text) : 0, out);
    free(text);
    return st;
}

/* The message of a v1 error answer. */
static const char *v1_message(const json_t *ans)
{
    const char *m = json_string_value(json_object_get(json_object_get(ans, "error"), "message"));
    return m ? m : "no answer from the v1 API";
}

/* ---- the table ---- */

static zjob *find(zeus_jobs *t, const char *id)
{
    for (zjob *j = t->jobs; j; j = j->next)
        if (strcmp(j->id, id) == 0) return j;
    return NULL;
}

static void job_free(zjob *j)
{
    for (long i = 0; j->ranks && i < j->info.world; i++) {
        free(j->ranks[i].sched);
        free(j->ranks[i].served_mhz);
    }
    free(j->ranks);
    free(j->slot_rank);
    free(j);
}

static int read_file(const char *path, char **out, size_t *len, prs_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return prs_error_set(err, PRS_EIO, "--zeus-profile %s: cannot open", path);
    buf b = {NULL, 0};
    char chunk[65536];
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (on_body(chunk, 1, n, &b) != n)
            rc = prs_error_set(err, PRS_EINVAL, "--zeus-profile %s: too large", path);
    fclose(f);
    if (!rc && !b.p) rc = prs_error_set(err, PRS_EINVAL, "--zeus-profile %s: empty", path);
    if (rc) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

int zeus_jobs_new(const prs_server_config *cfg, const char *v1_base_url, zeus_jobs **out,
                  prs_error *err)
{
    *out = NULL;
    zeus_jobs *t = calloc(1, sizeof *t);
    if (!t) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    t->cfg = *cfg;
    t->base = strdup(v1_base_url);
    t->create_token = cfg->create_token ? strdup(cfg->create_token) : NULL;
    t->curl = curl_easy_init();
    int rc = !t->base || !t->curl || (cfg->create_token && !t->create_token)
                 ? prs_error_set(err, PRS_ENOMEM, "out of memory")
                 : 0;
    if (!rc && cfg->zeus.profile_path)
        rc = read_file(cfg->zeus.profile_path, &t->profile_csv, &t->profile_len, err);
    if (rc) {
        zeus_jobs_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void zeus_jobs_free(zeus_jobs *t)
{
    if (!t) return;
    while (t->jobs) {
        zjob *j = t->jobs;
        t->jobs = j->next;
        job_free(j);
    }
    if (t->curl) curl_easy_cleanup(t->curl);
    free(t->base);
    free(t->create_token);
    free(t->profile_csv);
    free(t);
}

json_t *zeus_jobs_info(const zeus_jobs *t)
{
    json_t *args = json_object();
    if (t->cfg.zeus.min_clock_mhz > 0)
        json_object_set_new(args, "minimum_power_state", json_integer(t->cfg.zeus.min_clock_mhz));
    return json_pack("{s:s, s:o, s:s, s:s, s:b, s:s}", "scheduler",
                     t->cfg.zeus.profile_only ? "InstructionProfiler" : "perseusd",
                     "scheduler_args", args, "log_level", "INFO", "mode", "frequency", "dump_data",
                     0, "dump_dir", "");
}

/* ---- registration ---- */

static void register_job(zeus_jobs *t, zeus_req *r)
{
    prs_error err = {0, ""};
    zw_job info;
    if (zw_parse_job(r->body, &info, &err)) return zeus_fail(r, 400, "%s", err.msg);
    if (!info.microbatches) info.microbatches = t->cfg.zeus.microbatches;
    if (!info.microbatches)
        return zeus_fail(r, 400,
                         "num_microbatches: not given, and perseusd has no default "
                         "(--zeus-microbatches N)");
    if (t->njobs >= ZEUS_MAX_JOBS || t->nranks + info.world > ZEUS_MAX_RANKS)
        return zeus_fail(r, 429,
                         "the server holds %ld Zeus jobs of %ld ranks already (at most %d "
                         "jobs, %d ranks)",
                         t->njobs, t->nranks, ZEUS_MAX_JOBS, ZEUS_MAX_RANKS);
    zjob *j = calloc(1, sizeof *j);
    if (j) j->ranks = calloc((size_t)info.world, sizeof *j->ranks);
    if (j) j->slot_rank = malloc((size_t)info.world * sizeof *j->slot_rank);
    for (long i = 0; j && j->slot_rank && i < info.world; i++)
        j->slot_rank[i] = -1;
    char rnd[SECURE_ID_LEN + 1];
    if (!j || !j->ranks || !j->slot_rank || secure_new_id(rnd, &err) != 0) {
        if (j) job_free(j);
        return zeus_fail(r, 500, "cannot make a job id: %s", err.msg[0] ? err.msg : "no memory");
    }
    j->info = info;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d-%H-%M-%S", &tm);
    /* Shaped like Zeus's ids (fields joined by '+'), with a random part instead of the
     * scheduler's name: ids are never reused. */
    snprintf(j->id, sizeof j->id, "%s+dp%ld+pp%ld+tp%ld+perseusd+%s", when, info.dp, info.pp,
             info.tp, rnd);
    j->next = t->jobs;
    t->jobs = j;
    t->njobs++;
    t->nranks += info.world;
    zeus_answer(r, 200, json_string(j->id));
}

/* Check rank rr against the job's registrations so far and record it. 0, or answered. */
static int add_rank(zjob *j, zw_rank *rr, int dialect, zeus_req *r)
{
    zw_job *in = &j->info;
    if (j->dialect && j->dialect != dialect) {
        zeus_fail(r, 400, "this job's ranks registered in the other Zeus dialect");
        return -1;
    }
    if (rr->rank >= in->world || rr->dp >= in->dp || rr->pp >= in->pp || rr->tp >= in->tp) {
        zeus_fail(r, 400,
                  "rank %ld (dp_rank %ld, pp_rank %ld, tp_rank %ld) is outside the job's world "
                  "(%ld ranks: dp %ld, pp %ld, tp %ld)",
                  rr->rank, rr->dp, rr->pp, rr->tp, in->world, in->dp, in->pp, in->tp);
        return -1;
    }
    prs_error err = {0, ""};
    if (rr->sched && zw_check_schedule(rr, in->pp, in->microbatches, &err)) {
        zeus_fail(r, 400, "%s", err.msg);
        return -1;
    }
    zrank *k = &j->ranks[rr->rank];
    if (k->registered && (k->dp != rr->dp || k->pp != rr->pp || k->tp != rr->tp)) {
        zeus_fail(r, 409, "rank %ld registered before with other coordinates", rr->rank);
        return -1;
    }
    long slot = (rr->dp * in->pp + rr->pp) * in->tp + rr->tp;
    if (j->slot_rank[slot] >= 0 && j->slot_rank[slot] != rr->rank) {
        zeus_fail(r, 409, "rank %ld: dp_rank %ld, pp_rank %ld, tp_rank %ld is rank %ld's", rr->rank,
                  rr->dp, rr->pp, rr->tp, j->slot_rank[slot]);
        return -1;
    }
    if (j->nclocks && (j->nclocks != rr->nclocks ||
                       memcmp(j->clocks_mhz, rr->clocks_mhz, rr->nclocks * sizeof(long)) != 0)) {
        zeus_fail(r, 400, "rank %ld lists other clocks than the ranks before it", rr->rank);
        return -1;
    }
    long *served =
        k->served_mhz ? k->served_mhz : malloc((size_t)(2 * in->microbatches) * sizeof(long));
    if (!served) {
        zeus_fail(r, 500, "out of memory");
        return -1;
    }
    k->served_mhz = served;
    for (long i = 0; i < 2 * in->microbatches; i++)
        served[i] = rr->clocks_mhz[0];
    k->served_round = -1;
    free(k->sched);
    k->sched = rr->sched;
    k->nsched = rr->nsched;
    rr->sched = NULL;
    if (!k->registered) j->registered++;
    k->registered = 1;
    j->slot_rank[slot] = rr->rank;
    k->dp = rr->dp, k->pp = rr->pp, k->tp = rr->tp;
    j->dialect = dialect;
    memcpy(j->clocks_mhz, rr->clocks_mhz, rr->nclocks * sizeof(long));
    j->nclocks = rr->nclocks;
    return 0;
}

/* Register rank with the v1 job: 0, 409 (the v1 job refuses it: it ended), or -1; why says why. */
static int v1_register(zeus_jobs *t, zjob *j, long rank, char *why, size_t n);

static void register_rank(zeus_jobs *t, zeus_req *r, int artifact)
{
    prs_error err = {0, ""};
    zw_rank rr;
    if (zw_parse_rank(r->body, artifact, &rr, &err)) {
        zw_rank_free(&rr);
        return zeus_fail(r, 400, "%s", err.msg);
    }
    zjob *j = find(t, artifact ? rr.job_id : r->job);
    if (!j) {
        zw_rank_free(&rr);
        return zeus_fail(r, 404, "no such job");
    }
    int rc = add_rank(j, &rr, artifact ? 1 : 2, r);
    zw_rank_free(&rr);
    if (rc) return;
    /* A rank registering again once the v1 job exists (a restarted client) is registered
     * there again too. */
    char why[PRS_ERRMSG_MAX];
    int st = j->v1_id[0] ? v1_register(t, j, rr.rank, why, sizeof why) : 0;
    if (st) return zeus_fail(r, st == 409 ? 409 : 502, "%s", why); /* 409: the job ended */
    zeus_answer(r, 200, NULL);
}

/* ---- the v1 job ---- */

static int v1_register(zeus_jobs *t, zjob *j, long rank, char *why, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/ranks", j->v1_id);
    zrank *k = &j->ranks[rank];
    json_t *ans = NULL;
    int st = v1_json(t, "POST", path, j->token,
                     json_pack("{s:I, s:I, s:I, s:I}", "rank", (json_int_t)rank, "dp",
                               (json_int_t)k->dp, "pp", (json_int_t)k->pp, "tp", (json_int_t)k->tp),
                     &ans);
    if (st != 200 && st != 201) snprintf(why, n, "registering rank %ld: %s", rank, v1_message(ans));
    json_decref(ans);
    return st == 200 || st == 201 ? 0 : st == 409 ? 409 : -1;
}

/* The v1 job's creation request. */
static json_t *v1_spec(const zeus_jobs *t, const zjob *j)
{
    json_t *clocks = json_array();
    for (size_t i = 0; clocks && i < j->nclocks; i++)
        json_array_append_new(clocks, json_integer(j->clocks_mhz[i]));
    long n = j->round_iters > 0 ? j->round_iters : 3;
    json_t *prof = json_pack("{s:I, s:I, s:b, s:f}", "warmup_iterations", (json_int_t)(n >= 2),
                             "iterations_per_clock", (json_int_t)(n >= 2 ? n - 1 : 1),
                             "skip_dominated", 0, "target_se_pct", 0.0);
    long floor = t->cfg.zeus.min_clock_mhz;
    if (prof && floor > 0 && floor <= j->clocks_mhz[0])
        json_object_set_new(prof, "min_clock_mhz", json_integer(floor));
    char model[REQ_MAX_MODEL + 1];
    snprintf(model, sizeof model, "zeus:%s", j->info.model[0] ? j->info.model : "unnamed");
    json_t *s = json_pack("{s:s, s:I, s:I, s:I, s:I, s:o*, s:o*}", "model", model, "stages",
                          (json_int_t)j->info.pp, "microbatches", (json_int_t)j->info.microbatches,
                          "dp", (json_int_t)j->info.dp, "tp", (json_int_t)j->info.tp, "clocks_mhz",
                          clocks, "profiling", prof);
    if (s && t->cfg.zeus.blocking_power_w > 0)
        json_object_set_new(s, "blocking_power_w", json_real(t->cfg.zeus.blocking_power_w));
    if (s && t->cfg.change_cost_us > 0) /* perseusd --change-cost-us */
        json_object_set_new(s, "change_cost_us", json_real(t->cfg.change_cost_us));
    return s;
}

/* Create the v1 job (uploading the profile for master's clients) and register every rank. 0, or
 * -1 with why. */
static int v1_create(zeus_jobs *t, zjob *j, char *why, size_t n)
{
    if (j->v1_id[0]) return 0;
    if (j->dialect == 2 && !t->profile_csv) {
        snprintf(why, n,
                 "this client posts no results, so its job needs a profile to plan from: "
                 "start perseusd with --zeus-profile FILE");
        return -1;
    }
    json_t *ans = NULL;
    int st = v1_json(t, "POST", "/v1/jobs", NULL, v1_spec(t, j), &ans);
    const char *id = json_string_value(json_object_get(ans, "job_id"));
    const char *tok = json_string_value(json_object_get(ans, "token"));
    if (st != 201 || !id || !tok) {
        snprintf(why, n, "creating the job: %s", v1_message(ans));
        json_decref(ans);
        return -1;
    }
    snprintf(j->v1_id, sizeof j->v1_id, "%s", id);
    snprintf(j->token, sizeof j->token, "%s", tok);
    json_decref(ans);
    if (j->dialect == 2) {
        char path[128];
        snprintf(path, sizeof path, "/v1/jobs/%s/profile", j->v1_id);
        st = v1(t, "POST", path, j->token, "text/csv", t->profile_csv, t->profile_len, &ans);
        if (st != 200) snprintf(why, n, "uploading --zeus-profile: %s", v1_message(ans));
        json_decref(ans);
        if (st != 200) return -1;
    }
    for (long i = 0; i < j->info.world; i++)
        if (v1_register(t, j, i, why, n)) return -1;
    return 0;
}

/* ---- the schedule barrier ---- */

/* Take the barrier's requests out (in arrival order). */
static zeus_req *take_waiting(zjob *j)
{
    zeus_req *r = j->waiting;
    j->waiting = NULL;
    j->nwaiting = 0;
    for (long i = 0; i < j->info.world; i++)
        j->ranks[i].waiting = 0;
    return r;
}

static void fail_waiting(zjob *j, int status, const char *msg)
{
    zeus_req *r = take_waiting(j);
    while (r) {
        zeus_req *next = r->next;
        zeus_fail(r, status, "%s", msg);
        r = next;
    }
}

/* Answer a rank with the clocks of its computations (2M, 1F1B order). */
static void answer_clocks(zjob *j, zeus_req *r, const long *mhz, long round)
{
    zrank *k = &j->ranks[r->rank];
    long M = j->info.microbatches;
    memcpy(k->served_mhz, mhz, (size_t)(2 * M) * sizeof(long));
    k->served_round = round;
    zeus_answer(r, 200,
                j->dialect == 1
                    ? zw_power_states(r->rank, k->sched, k->nsched, mhz, (size_t)(2 * M))
                    : zw_frequencies(r->rank, j->info.pp, k->pp, M, mhz));
}

/* The v1 schedule of r's rank: the answer (NULL when none), its status into *st. */
static json_t *fetch_one(zeus_jobs *t, zjob *j, const zeus_req *r, int *st)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=%ld", j->v1_id, r->rank);
    json_t *ans = NULL;
    *st = v1(t, "GET", path, j->token, NULL, NULL, 0, &ans);
    return ans;
}

/* Whether a v1 schedule tells the ranks to stop: the job done or failed, or past profiling with
 * --zeus-profile-only. Writes the "[profiling-done]" detail into msg. */
static int says_stop(const zeus_jobs *t, int st, json_t *ans, char *msg, size_t n)
{
    const char *phase = json_string_value(json_object_get(ans, "phase"));
    if (st != 200 || !phase) return 0;
    if (strcmp(phase, "done") == 0 || strcmp(phase, "failed") == 0)
        snprintf(msg, n, "[profiling-done] the job is %s, so stop training", phase);
    else if (t->cfg.zeus.profile_only && strcmp(phase, "profiling") != 0)
        snprintf(msg, n, "[profiling-done] Profiling is done, so stop training!");
    else
        return 0;
    return 1;
}

/* Answer a rank from its v1 schedule (st, ans). */
static void serve_one(zjob *j, zeus_req *r, int st, json_t *ans)
{
    const char *phase = json_string_value(json_object_get(ans, "phase"));
    json_t *clocks = json_object_get(ans, "clocks_mhz");
    long M = j->info.microbatches;
    if (st != 200 || !phase) return zeus_fail(r, 502, "the v1 schedule: %s", v1_message(ans));
    long mhz[2 * 4096];
    size_t n = json_array_size(clocks);
    for (long i = 0; i < 2 * M; i++) /* none yet (registering): the highest clock */
        mhz[i] = n == (size_t)(2 * M) ? (long)json_integer_value(json_array_get(clocks, i))
                                      : j->clocks_mhz[0];
    json_t *rd = json_object_get(ans, "round");
    answer_clocks(
        j, r, mhz,
        strcmp(phase, "profiling") == 0 && json_is_integer(rd) ? (long)json_integer_value(rd) : -1);
}

/* Answer the barrier's ranks, all alike when one of their schedules says stop: the job can end
 * between two ranks' schedules, and a rank told to go on would then wait in the next barrier
 * for ranks that had stopped. */
static void serve_waiting(zeus_jobs *t, zjob *j)
{
    long n = j->nwaiting;
    zeus_req *r = take_waiting(j);
    json_t **ans = calloc((size_t)n, sizeof(json_t *));
    int *st = calloc((size_t)n, sizeof *st);
    char stop[128] = "";
    long i = 0;
    for (zeus_req *q = r; q && ans && st && !stop[0]; q = q->next, i++) { /* none after a stop */
        ans[i] = fetch_one(t, j, q, &st[i]);
        says_stop(t, st[i], ans[i], stop, sizeof stop);
    }
    i = 0;
    while (r) {
        zeus_req *next = r->next;
        if (!ans || !st)
            zeus_fail(r, 503, "out of memory");
        else if (stop[0])
            zeus_fail(r, 500, "%s", stop);
        else
            serve_one(j, r, st[i], ans[i]);
        if (ans) json_decref(ans[i]);
        r = next;
        i++;
    }
    free(ans);
    free(st);
}

/* The v1 job's phase and, when failed, its reason (into why). 0, or -1. */
static int v1_phase(zeus_jobs *t, zjob *j, char *phase, size_t n, char *why, size_t wn)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", j->v1_id);
    json_t *ans = NULL;
    int st = v1(t, "GET", path, j->token, NULL, NULL, 0, &ans);
    const char *p = json_string_value(json_object_get(ans, "phase"));
    const char *reason = json_string_value(json_object_get(ans, "reason"));
    snprintf(phase, n, "%s", p ? p : "");
    snprintf(why, wn, "%s", reason ? reason : v1_message(ans));
    json_decref(ans);
    return st == 200 && p ? 0 : -1;
}

/* Master's barrier: answered once the v1 job runs its plan. */
static void check_plan(zeus_jobs *t, zjob *j)
{
    char phase[32], why[PRS_ERRMSG_MAX];
    j->polled = prs_mono_s();
    if (v1_phase(t, j, phase, sizeof phase, why, sizeof why)) {
        j->awaiting_plan = 0;
        fail_waiting(j, 502, why);
    } else if (strcmp(phase, "running") == 0) {
        j->awaiting_plan = 0;
        serve_waiting(t, j);
    } else if (strcmp(phase, "failed") == 0 || strcmp(phase, "done") == 0) {
        j->awaiting_plan = 0;
        char msg[PRS_ERRMSG_MAX + 64];
        snprintf(msg, sizeof msg, "[profiling-done] the job is %s: %s", phase, why);
        fail_waiting(j, 500, msg);
    } else {
        j->awaiting_plan = 1;
    }
}

/* Every rank asked: answer them all. */
static void release(zeus_jobs *t, zjob *j)
{
    long round = j->round++;
    if (j->dialect == 1 && round < ZEUS_WARMUP_ROUNDS) {
        long mhz[2 * 4096];
        for (long i = 0; i < 2 * j->info.microbatches; i++)
            mhz[i] = j->clocks_mhz[0];
        zeus_req *r = take_waiting(j);
        while (r) {
            zeus_req *next = r->next;
            answer_clocks(j, r, mhz, -1);
            r = next;
        }
        return;
    }
    if (!j->failed[0] && !j->v1_id[0]) v1_create(t, j, j->failed, sizeof j->failed);
    if (j->failed[0]) return fail_waiting(j, j->dialect == 2 ? 409 : 500, j->failed);
    if (j->dialect == 2) return check_plan(t, j);
    serve_waiting(t, j);
}

static void schedule(zeus_jobs *t, zeus_req *r)
{
    zjob *j = find(t, r->job);
    if (!j) return zeus_fail(r, 404, "no such job");
    if (r->rank >= j->info.world)
        return zeus_fail(r, 400, "rank: %ld is outside the job's %ld ranks", r->rank,
                         j->info.world);
    zrank *k = &j->ranks[r->rank];
    if (!k->registered) return zeus_fail(r, 404, "rank %ld has not registered", r->rank);
    if (k->waiting) { /* asked again (a client that gave up): the newer request waits */
        for (zeus_req **pp = &j->waiting; *pp; pp = &(*pp)->next)
            if ((*pp)->rank == r->rank) {
                zeus_req *old = *pp;
                *pp = old->next;
                j->nwaiting--;
                zeus_fail(old, 409, "rank %ld asked for its schedule again", r->rank);
                break;
            }
    }
    zeus_req **tail = &j->waiting;
    while (*tail)
        tail = &(*tail)->next;
    *tail = r;
    r->next = NULL;
    k->waiting = 1;
    j->nwaiting++;
    if (!j->awaiting_plan && j->nwaiting == j->info.world) release(t, j);
}

/* ---- results ---- */

static void result(zeus_jobs *t, zeus_req *r)
{
    prs_error err = {0, ""};
    long rank;
    if (zw_result_rank(r->body, &rank, &err)) return zeus_fail(r, 400, "%s", err.msg);
    zjob *j = find(t, r->job);
    if (!j) return zeus_fail(r, 404, "no such job");
    if (rank >= j->info.world || !j->ranks[rank].registered)
        return zeus_fail(r, 404, "rank %ld has not registered", rank);
    zrank *k = &j->ranks[rank];
    zw_served sv = {j->info.pp, k->pp, j->info.microbatches, k->served_mhz, k->served_round};
    json_t *its = NULL;
    size_t n = 0;
    if (zw_result_to_v1(r->body, &sv, &k->next_iteration, &rank, &n, &its, &err))
        return zeus_fail(r, 400, "%s", err.msg);
    if (!j->v1_id[0]) { /* a warm-up round: it says how many iterations a round has */
        json_decref(its);
        if (n > 0 && (j->round_iters == 0 || (long)n < j->round_iters)) j->round_iters = (long)n;
        return zeus_answer(r, 200, NULL);
    }
    if (json_array_size(its) == 0) {
        json_decref(its);
        return zeus_answer(r, 200, NULL);
    }
    json_t *post = json_pack("{s:I, s:o}", "rank", (json_int_t)rank, "iterations", its);
    if (post && k->served_round >= 0)
        json_object_set_new(post, "round", json_integer(k->served_round));
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/results", j->v1_id);
    json_t *ans = NULL;
    int st = v1_json(t, "POST", path, j->token, post, &ans);
    char phase[32] = "", why[PRS_ERRMSG_MAX];
    if (st == 409) v1_phase(t, j, phase, sizeof phase, why, sizeof why);
    if (st == 200 || strcmp(phase, "done") == 0 || strcmp(phase, "failed") == 0)
        zeus_answer(r, 200, NULL); /* after the end: dropped, the next schedule says so */
    else
        zeus_fail(r, st == 400 || st == 409 ? st : 502, "%s", v1_message(ans));
    json_decref(ans);
}

/* ---- entry points ---- */

/* The v1 job behind a Zeus job and its token: whoever may drive the Zeus job (loopback, or the
 * secret prefix) may steer it through API v1 too (stragglers, power caps, completion). */
static void v1_job(zeus_jobs *t, zeus_req *r)
{
    zjob *j = find(t, r->job);
    if (!j) return zeus_fail(r, 404, "no such job");
    zeus_answer(r, 200,
                json_pack("{s:s, s:s?, s:s?, s:I, s:I}", "job_id", j->id, "v1_job_id",
                          j->v1_id[0] ? j->v1_id : NULL, "token", j->token[0] ? j->token : NULL,
                          "registered", (json_int_t)j->registered, "waiting",
                          (json_int_t)j->nwaiting));
}

void zeus_jobs_handle(zeus_jobs *t, zeus_req *r)
{
    switch (r->route) {
    case ZR_REGISTER_JOB:
        return register_job(t, r);
    case ZR_REGISTER_RANK:
        return register_rank(t, r, 1);
    case ZR_REGISTER_RANK_MASTER:
        return register_rank(t, r, 0);
    case ZR_SCHEDULE:
        return schedule(t, r);
    case ZR_RESULT:
        return result(t, r);
    case ZR_V1_JOB:
        return v1_job(t, r);
    default:
        return zeus_fail(r, 404, "no such route");
    }
}

int zeus_jobs_waiting(const zeus_jobs *t)
{
    for (const zjob *j = t->jobs; j; j = j->next)
        if (j->awaiting_plan) return 1;
    return 0;
}

void zeus_jobs_poll(zeus_jobs *t)
{
    double now = prs_mono_s();
    for (zjob *j = t->jobs; j; j = j->next)
        if (j->awaiting_plan && now - j->polled >= ZEUS_POLL_S) check_plan(t, j);
}

void zeus_jobs_abort(zeus_jobs *t)
{
    for (zjob *j = t->jobs; j; j = j->next)
        fail_waiting(j, 503, "the server is stopping");
}
