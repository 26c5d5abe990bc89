/* The server's own routes: GET /healthz, POST /v1/jobs (a job's creation, under the server's
 * caps), GET /v1/jobs (the administrator's list). /metrics is in server_metrics.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "request.h"

enum MHD_Result handle_healthz(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m)
{
    (void)m;
    pthread_rwlock_rdlock(&s->lock);
    long n = s->njobs;
    pthread_rwlock_unlock(&s->lock);
    return reply_json(c, cc, 200, json_pack("{s:s, s:I}", "status", "ok", "jobs", (json_int_t)n));
}

/* The server's caps on a new job of `world` ranks (lock held): 0, or -1 with e filled. */
static int check_caps(const prs_server *s, long world, api_err *e)
{
    if (s->njobs >= s->cfg.max_jobs)
        return api_fail(e, 429, "too_many_jobs",
                        "the server holds %ld jobs, its limit (--max-jobs %ld): delete finished "
                        "jobs (DELETE /v1/jobs/{id}) or wait for their retention to pass",
                        s->njobs, s->cfg.max_jobs);
    if (s->nranks + world > s->cfg.max_ranks)
        return api_fail(e, 429, "too_many_ranks",
                        "%ld more ranks would make %ld on the server, over its limit "
                        "(--max-ranks %ld)",
                        world, s->nranks + world, s->cfg.max_ranks);
    return 0;
}

enum MHD_Result handle_create(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                              const route_match *m)
{
    (void)m;
    job_spec spec;
    prs_error err;
    if (req_parse_job_spec(cc->body ? cc->body : "", cc->len, &spec, &err))
        return reply_error(s, c, cc, 400, "bad_request", err.msg);
    if (!spec.has_change_cost && s->cfg.change_cost_us > 0) { /* perseusd --change-cost-us */
        spec.has_change_cost = 1;
        spec.change_cost_us = s->cfg.change_cost_us;
    }
    long world = (long)spec.dp * spec.stages * spec.tp;
    if (world > s->cfg.max_world) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "dp x stages x tp = %ld ranks: over the server's limit of %ld per job "
                 "(--max-world)",
                 world, s->cfg.max_world);
        return reply_error(s, c, cc, 400, "bad_request", msg);
    }
    char id[SECURE_ID_LEN + 1], token[SECURE_TOKEN_LEN + 1];
    if (secure_new_token(token, NULL))
        return reply_error(s, c, cc, 500, "internal", "no randomness");
    uint8_t hash[SECURE_SHA256_LEN];
    secure_sha256(token, strlen(token), hash);
    /* The job's place is reserved under the table lock, the job made and stored outside it
     * (under the store's mutex alone), then linked: the table lock is held for the counts and
     * the link only. */
    pthread_rwlock_wrlock(&s->lock);
    api_err e = {0, NULL, ""};
    if (check_caps(s, world, &e)) {
        pthread_rwlock_unlock(&s->lock);
        return reply_api_error(s, c, cc, &e);
    }
    s->njobs++;
    s->nranks += world;
    pthread_rwlock_unlock(&s->lock);
    job *j = NULL;
    int ok = secure_new_id(id, NULL) == 0;
    if (ok) {
        pthread_mutex_lock(&s->store_mu);
        ok = store_begin(s->st) == 0 &&
             job_create(s->st, &spec, id, hash, (long long)time(NULL), &j, &e) == 0 &&
             store_commit(s->st) == 0;
        if (!ok) {
            store_rollback(s->st);
            if (!e.code) job_store_fail(&e, s->st);
        }
        pthread_mutex_unlock(&s->store_mu);
    } else {
        api_fail(&e, 500, "internal", "no randomness");
    }
    int spec_reused = ok && j->frontier != NULL;
    pthread_rwlock_wrlock(&s->lock);
    if (ok && table_add(s, j, 1) != 0) {
        ok = 0;
        api_fail(&e, 500, "internal", "out of memory");
    }
    if (!ok) {
        s->njobs--;
        s->nranks -= world;
    }
    pthread_rwlock_unlock(&s->lock);
    if (!ok) {
        job_free(j);
        return reply_api_error(s, c, cc, &e);
    }
    int reused = spec_reused; /* read before the job was linked: others may change it since */
    snprintf(cc->job_id, sizeof cc->job_id, "%s", id);
    srv_log(s, PRS_LOG_INFO, "msg=job_created job=%s ranks=%d reused_frontier=%d", id,
            spec.dp * spec.stages * spec.tp, reused);
    return reply_json(c, cc, 201,
                      json_pack("{s:s, s:s, s:s, s:b}", "job_id", id, "token", token, "phase",
                                "registering", "reused_frontier", reused));
}

static int cmp_job_id(const void *a, const void *b)
{
    return strcmp((*(job *const *)a)->id, (*(job *const *)b)->id);
}

/* GET /v1/jobs, the administrator's (checked by the router): one line of every job the server
 * holds, by id. The table lock is held only to take references (pin_all_jobs); each job is read
 * under its own lock. */
enum MHD_Result handle_list(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                            const route_match *m)
{
    (void)m;
    size_t n;
    job **all = table_pin_all(s, &n);
    if (n > 1) qsort(all, n, sizeof(job *), cmp_job_id);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        job *j = all[i];
        pthread_rwlock_rdlock(j->lock);
        if (!j->deleted)
            json_array_append_new(
                list, json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i}", "job_id", j->id,
                                "model", j->spec.model, "phase", job_phase_name(j->phase), "stages",
                                j->spec.stages, "dp", j->spec.dp, "tp", j->spec.tp,
                                "ranks_registered", j->nregistered, "ranks_expected", j->world));
        pthread_rwlock_unlock(j->lock);
    }
    table_unpin_all(all, n);
    if (!list) return reply_error(s, c, cc, 500, "internal", "out of memory");
    return reply_json(
        c, cc, 200,
        json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(list), "jobs", list));
}
