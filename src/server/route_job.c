/* One job's routes (/v1/jobs/{id}/...): the views (status, schedule, frontier, profile) under
 * the job's lock shared, the changes (register, results, stragglers, power cap, profile upload,
 * complete, delete) each as one transaction under store_mu and the job's lock exclusively.
 * Bodies are parsed, and uploads checked and serialised, before any lock is taken; answers are
 * sent once the locks are released. */
#include "perseus/numfmt.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "job_assign.h"
#include "powercap_job.h"
#include "request.h"

/* ?offset=&limit= of GET /frontier: neither gives the summary (*limit 0); either gives a page of
 * at most FRONTIER_PAGE_MAX points (FRONTIER_PAGE_DEFAULT when limit is not given). */
#define FRONTIER_PAGE_DEFAULT 1000
#define FRONTIER_PAGE_MAX 10000

/* Query argument `name` as a decimal integer in [lo, hi] into *v: 0, 1 when absent (*v left as
 * it is), -1 when malformed or out of range. */
static int int_arg(struct MHD_Connection *c, const char *name, int lo, int hi, int *v)
{
    const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    if (!t) return 1;
    int x;
    if (!(t[0] >= '0' && t[0] <= '9') || prs_num_parse_int(t, &x) != 0 || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

static int parse_page_args(struct MHD_Connection *c, long *offset, long *limit, api_err *e)
{
    int o = 0, l = FRONTIER_PAGE_DEFAULT;
    int ro = int_arg(c, "offset", 0, INT_MAX, &o),
        rl = int_arg(c, "limit", 1, FRONTIER_PAGE_MAX, &l);
    if (ro < 0) return api_fail(e, 400, "bad_request", "offset: expected an integer >= 0");
    if (rl < 0)
        return api_fail(e, 400, "bad_request", "limit: expected an integer in 1..%d",
                        FRONTIER_PAGE_MAX);
    *offset = o;
    *limit = ro == 1 && rl == 1 ? 0 : l;
    return 0;
}

static int parse_rank_arg(struct MHD_Connection *c, int *rank)
{
    return int_arg(c, "rank", 0, INT_MAX, rank) == 0 ? 0 : -1;
}

/* Run a mutating job call as one transaction (store_mu and the job's lock held exclusively);
 * reload the job if it fails on the server side. */
typedef int (*mutate_fn)(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e);

static int run_tx(prs_server *s, job *j, conn_ctx *cc, mutate_fn fn, void *arg, api_err *e)
{
    int action = JOB_ACT_NONE;
    if (store_begin(s->st)) return job_store_fail(e, s->st);
    job_phase before = j->phase;
    if (fn(s, j, cc, arg, &action, e) != 0 || store_commit(s->st) != 0) {
        store_rollback(s->st);
        if (!e->code) job_store_fail(e, s->st);
        if (e->http >= 500) table_reload(s, j);
        return -1;
    }
    char why[REQ_MSG_MAX + 8];
    if (j->phase != before)
        srv_log(s, j->phase == JOB_FAILED ? PRS_LOG_WARN : PRS_LOG_INFO,
                "msg=phase job=%s from=%s to=%s%s%s", j->id, job_phase_name(before),
                job_phase_name(j->phase), j->phase == JOB_FAILED ? " reason=" : "",
                j->phase == JOB_FAILED ? srv_kv_quote(j->reason, why, sizeof why) : "");
    if (action == JOB_ACT_PLAN) planq_start(s, j);
    return 0;
}

static int do_register(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    int *created = arg;
    req_rank r;
    prs_error err;
    if (req_parse_rank(cc->body ? cc->body : "", cc->len, &r, &err))
        return api_fail(e, 400, "bad_request", "%s", err.msg);
    return job_register(j, s->st, &r, created, action, e);
}

/* A results post, parsed before the job lock is taken (parse_rc: req_parse_results' answer). */
typedef struct parsed_results {
    int parse_rc;
    prs_error err;
    req_results r;
} parsed_results;

static int do_results(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    (void)cc;
    parsed_results *p = arg;
    if (p->parse_rc) return api_fail(e, 400, "bad_request", "%s", p->err.msg);
    return job_results(j, s->st, &p->r, action, e);
}

static int do_straggler(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    req_straggler r;
    prs_error err;
    if (req_parse_straggler(cc->body ? cc->body : "", cc->len, &r, &err))
        return api_fail(e, 400, "bad_request", "%s", err.msg);
    return job_set_straggler(j, s->st, &r, e);
}

static int do_clear(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    return job_clear_straggler(j, s->st, (int)*(long *)arg, e);
}

static int do_power_cap(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    double watts = 0;
    prs_error err;
    if (*(int *)arg && req_parse_power_cap(cc->body ? cc->body : "", cc->len, &watts, &err))
        return api_fail(e, 400, "bad_request", "%s", err.msg);
    return job_set_power_cap(j, s->st, watts, e);
}

/* An upload parsed, checked and written as the CSV to store outside every lock. */
typedef struct parsed_upload {
    prs_profile *p;
    char *csv;
    size_t len;
} parsed_upload;

static int do_profile(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    parsed_upload *u = arg;
    int rc = job_install_profile(j, s->st, u->p, u->csv, u->len, action, e);
    u->p = NULL; /* taken over */
    return rc;
}

/* An uploaded profile, parsed and judged before the job lock is taken: it must parse, cover the
 * job's stages, be measured at the job's clocks and make a planning problem with a frontier,
 * within the server's limits (spec: a copy of the job's, pipe: its pipeline). 0 with *out, or
 * -1 with e filled. */
static int parse_upload(prs_server *s, const job_spec *spec, const prs_pipeline *pipe, conn_ctx *cc,
                        parsed_upload *out, api_err *e)
{
    out->p = NULL;
    out->csv = NULL;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_profile_parse("profile", cc->body ? cc->body : "", cc->len, &p, &err) ||
        prs_profile_check_stages(p, prs_pipeline_chunks(pipe), &err) ||
        spec_check_profile_clocks(spec, p, &err)) {
        prs_profile_free(p);
        return api_fail(e, 400, "bad_profile", "%s", err.msg);
    }
    char why[REQ_MSG_MAX];
    const char *code;
    prs_plan_opts o;
    double peak;
    planq_opts(s, pipe, spec->cost_model, &o);
    if (planq_check_plannable(s, p, &o, &peak, &code, why, sizeof why)) {
        prs_profile_free(p);
        if (strcmp(code, "canceled") == 0)
            return api_fail(e, 503, "unavailable", "the server is stopping");
        return api_fail(e, 400, code, "%s", why);
    }
    if (job_profile_csv(p, &out->csv, &out->len)) {
        prs_profile_free(p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    out->p = p;
    return 0;
}

static int do_complete(prs_server *s, job *j, conn_ctx *cc, void *arg, int *action, api_err *e)
{
    return job_complete(j, s->st, e);
}

/* The routes that only read a job: its lock shared, the store untouched but for the profile. */
static int is_view(enum route r)
{
    return r == R_SCHEDULE || r == R_STATUS || r == R_FRONTIER || r == R_PROFILE_GET;
}

/* A job request's answer, made under the job's locks and sent once they are released. */
typedef struct job_answer {
    api_err e;
    json_t *out; /* a JSON answer, or */
    char *text;  /* a text one (schedule, profile CSV) */
    size_t tlen;
    int status, rc;
} job_answer;

/* What a job request brings, made before any lock is taken. */
typedef struct job_input {
    parsed_upload upload;
    parsed_results results;
    int by_owner; /* the job's own token was presented (else the administrator's: a deletion) */
} job_input;

static void job_input_free(job_input *in)
{
    prs_profile_free(in->upload.p); /* left when the request failed before the upload */
    free(in->upload.csv);
    req_results_free(&in->results.r);
}

/* The routes that read a job (its lock shared; store_mu held for the profile). */
static void answer_view(prs_server *s, struct MHD_Connection *c, const route_match *m, const job *j,
                        job_answer *a)
{
    switch (m->route) {
    case R_STATUS:
        a->out = job_status_json(j);
        break;
    case R_SCHEDULE: {
        int rank;
        if (parse_rank_arg(c, &rank))
            a->rc = api_fail(&a->e, 400, "bad_request", "rank: expected ?rank=N");
        else
            a->rc = job_schedule(j, rank, &a->text, &a->tlen, &a->e);
        break;
    }
    case R_FRONTIER: {
        long offset = 0, limit = 0;
        a->rc = parse_page_args(c, &offset, &limit, &a->e);
        if (!a->rc) a->out = job_frontier_json(j, offset, limit);
        if (!a->rc && !a->out)
            a->rc = api_fail(&a->e, 404, "not_found", "the job has no frontier yet");
        break;
    }
    default: { /* R_PROFILE_GET */
        char src[16];
        if (store_get_profile(s->st, j->id, &a->text, &a->tlen, src))
            a->rc = job_store_fail(&a->e, s->st);
        if (!a->rc && !a->text)
            a->rc = api_fail(&a->e, 404, "not_found", "the job has no profile yet");
    }
    }
}

/* The routes that change a job (store_mu and its lock held exclusively), each one transaction. */
static void answer_change(prs_server *s, conn_ctx *cc, const route_match *m, job *j, job_input *in,
                          job_answer *a)
{
    switch (m->route) {
    case R_REGISTER: {
        int created = 0;
        a->rc = run_tx(s, j, cc, do_register, &created, &a->e);
        a->status = created ? 201 : 200;
        if (!a->rc)
            a->out = json_pack("{s:s, s:i, s:i}", "phase", job_phase_name(j->phase), "registered",
                               j->nregistered, "expected", j->world);
        break;
    }
    case R_RESULTS: {
        size_t n = in->results.parse_rc ? 0 : in->results.r.niterations;
        a->rc = run_tx(s, j, cc, do_results, &in->results, &a->e);
        if (!a->rc)
            a->out = json_pack("{s:I, s:s, s:I, s:I}", "accepted", (json_int_t)n, "phase",
                               job_phase_name(j->phase), "round", (json_int_t)j->round,
                               "measurements", (json_int_t)j->measurements);
        break;
    }
    case R_STRAGGLER_SET:
    case R_STRAGGLER_CLEAR: {
        long dp = m->dp;
        a->rc = run_tx(s, j, cc, m->route == R_STRAGGLER_SET ? do_straggler : do_clear, &dp, &a->e);
        if (!a->rc)
            a->out = json_pack("{s:s, s:I, s:o}", "phase", job_phase_name(j->phase), "round",
                               (json_int_t)j->round, "rule", job_rule_json(j));
        break;
    }
    case R_POWER_CAP_SET:
    case R_POWER_CAP_CLEAR: {
        int set = m->route == R_POWER_CAP_SET;
        a->rc = run_tx(s, j, cc, do_power_cap, &set, &a->e);
        if (!a->rc)
            a->out = json_pack(
                "{s:s, s:I, s:o, s:o}", "phase", job_phase_name(j->phase), "round",
                (json_int_t)j->round, "power_cap",
                plan_powers_cap_json(&j->powers, j->frontier, j->spec.power_cap_w, j->spec.dp),
                "rule", job_rule_json(j));
        break;
    }
    case R_PROFILE_PUT:
        a->rc = run_tx(s, j, cc, do_profile, &in->upload, &a->e);
        if (!a->rc) a->out = json_pack("{s:s}", "phase", job_phase_name(j->phase));
        break;
    case R_COMPLETE:
        a->rc = run_tx(s, j, cc, do_complete, NULL, &a->e);
        if (!a->rc) {
            planq_cancel(s, j);
            a->out = json_pack("{s:s}", "phase", job_phase_name(j->phase));
        }
        break;
    case R_DELETE:
        a->rc = janitor_retire_job(s, j, in->by_owner ? "request" : "admin", &a->e);
        if (!a->rc) a->out = json_pack("{s:s, s:b}", "job_id", cc->job_id, "deleted", 1);
        break;
    default:
        a->rc = api_fail(&a->e, 404, "not_found", "no such route");
    }
}

/* An upload is parsed, checked and written as its CSV before any lock, for the job's owner
 * only (the job's pipeline read under its shared lock): 0, or the refusal's HTTP status with
 * e filled. */
static int prepare_upload(prs_server *s, conn_ctx *cc, job *j, int have_token,
                          const uint8_t presented[SECURE_SHA256_LEN], parsed_upload *u, api_err *e)
{
    prs_pipeline pipe;
    job_spec *spec = malloc(sizeof *spec);
    if (!spec) {
        api_fail(e, 500, "internal", "out of memory");
        return 500;
    }
    pthread_rwlock_rdlock(j->lock);
    int gone = j->deleted, owner = !gone && auth_job_owner(have_token, presented, j);
    if (owner) job_pipeline(j, &pipe);
    if (owner) *spec = j->spec;
    pthread_rwlock_unlock(j->lock);
    if (gone) api_fail(e, 404, "not_found", "no such job");
    if (!gone && !owner) api_fail(e, 401, "unauthorized", "missing or wrong bearer token");
    if (!gone && owner) parse_upload(s, spec, &pipe, cc, u, e);
    free(spec);
    return e->code ? e->http : 0;
}

enum MHD_Result handle_job(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                           const route_match *m)
{
    uint8_t presented[SECURE_SHA256_LEN];
    int have_token = auth_bearer_hash(c, presented);
    job *j = table_pin(s, m->id); /* the table lock is held for the look-up only */
    if (!j) return reply_error(s, c, cc, 404, "not_found", "no such job");
    job_input in = {{NULL, NULL, 0}, {0}, 0};
    job_answer a = {{0, NULL, ""}, NULL, NULL, 0, 200, 0};
    if (m->route == R_PROFILE_PUT &&
        prepare_upload(s, cc, j, have_token, presented, &in.upload, &a.e)) {
        table_unpin(j);
        return reply_api_error(s, c, cc, &a.e);
    }
    /* A results body is parsed before any lock, so a large post holds up no other client; its
     * errors are answered after the token was checked. */
    if (m->route == R_RESULTS)
        in.results.parse_rc =
            req_parse_results(cc->body ? cc->body : "", cc->len, &in.results.r, &in.results.err);
    /* Views share the job's lock (the profile's text is read under store_mu too); changes take
     * store_mu first, then the job's lock exclusively. */
    int view = is_view(m->route), with_store = !view || m->route == R_PROFILE_GET;
    if (with_store) pthread_mutex_lock(&s->store_mu);
    if (view)
        pthread_rwlock_rdlock(j->lock);
    else
        pthread_rwlock_wrlock(j->lock);
    in.by_owner = auth_job_owner(have_token, presented, j);
    if (j->deleted)
        a.rc = api_fail(&a.e, 404, "not_found", "no such job");
    else if (!in.by_owner && !auth_may_act(s, m->def->auth, have_token, presented, j))
        a.rc = api_fail(&a.e, 401, "unauthorized", "missing or wrong bearer token");
    else {
        __atomic_store_n(&j->active_unix, (long long)time(NULL), __ATOMIC_RELAXED);
        if (view)
            answer_view(s, c, m, j, &a);
        else
            answer_change(s, cc, m, j, &in, &a);
    }
    pthread_rwlock_unlock(j->lock);
    if (with_store) pthread_mutex_unlock(&s->store_mu);
    if (m->route == R_DELETE && !a.rc) {
        janitor_unlink_job(s, j);
        janitor_wake(s);
    }
    table_unpin(j);
    job_input_free(&in);
    if (a.rc) {
        json_decref(a.out);
        free(a.text);
        return reply_api_error(s, c, cc, &a.e);
    }
    if (a.text)
        return reply_text(c, cc, 200, m->route == R_SCHEDULE ? "application/json" : "text/csv",
                          a.text, a.tlen);
    return reply_json(c, cc, a.status, a.out);
}
