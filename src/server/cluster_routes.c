/* The HTTP routes of inference clusters (cluster.h, docs/api.md "Inference clusters"): declare
 * one with the creation token (answered with the cluster's id and its own token), and, with that
 * token (or the administrator's where the table says so), read its state and desired
 * configuration, report loads, replace its profile, delete it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "cluster_store.h"
#include "http.h"

/* Whether the presented token may act on cluster cl by route m. */
static int may_act(prs_server *s, struct MHD_Connection *c, const route_match *m, const cluster *cl)
{
    uint8_t presented[SECURE_SHA256_LEN];
    int have = auth_bearer_hash(c, presented);
    return (have && secure_equal(presented, cl->token_hash, SECURE_SHA256_LEN)) ||
           (m->def->auth == AUTH_CLUSTER_OR_ADMIN && auth_is_admin(s, have, presented));
}

int cluster_refusal(prs_server *s, struct MHD_Connection *c, const route_match *m)
{
    if (m->def->auth != AUTH_CLUSTER && m->def->auth != AUTH_CLUSTER_OR_ADMIN) return 0;
    cluster *cl = cluster_pin(s->clusters, m->id);
    if (!cl) return 404;
    int refused = may_act(s, c, m, cl) ? 0 : 401;
    cluster_unpin(s->clusters, cl);
    return refused;
}

/* The cluster of the route's id, pinned, when the presented token may act on it: NULL after
 * answering 404 or 401 (*answer set). */
static cluster *cluster_for(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                            const route_match *m, enum MHD_Result *answer)
{
    cluster *cl = cluster_pin(s->clusters, m->id);
    if (!cl) {
        *answer = reply_error(s, c, cc, 404, "not_found", "no such cluster");
        return NULL;
    }
    if (!may_act(s, c, m, cl)) {
        cluster_unpin(s->clusters, cl);
        *answer = reply_error(s, c, cc, 401, "unauthorized", "missing or wrong bearer token");
        return NULL;
    }
    return cl;
}

enum MHD_Result handle_cluster_create(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                      const route_match *m)
{
    (void)m;
    cluster_spec *spec = calloc(1, sizeof *spec);
    if (!spec) return reply_error(s, c, cc, 500, "internal", "out of memory");
    prs_error err = {0};
    if (cluster_spec_parse(cc->body ? cc->body : "", cc->len, spec, &err)) {
        free(spec);
        return reply_error(s, c, cc, 400, "bad_request", err.msg);
    }
    char token[SECURE_TOKEN_LEN + 1];
    uint8_t hash[SECURE_SHA256_LEN];
    cluster *cl = NULL;
    int rc = secure_new_token(token, &err);
    if (!rc) {
        secure_sha256(token, strlen(token), hash);
        rc = cluster_create(s->clusters, spec, hash, &cl, &err);
    }
    cluster_spec_free(spec);
    free(spec);
    if (!rc && cluster_store_insert(s, cl, cc->body, cc->len, &err) != 0) {
        cluster_delete(s->clusters, cl);
        cluster_unpin(s->clusters, cl);
        return reply_error(s, c, cc, 500, "storage", err.msg);
    }
    if (rc)
        return reply_error(s, c, cc,
                           rc == PRS_EINVAL   ? 400
                           : rc == PRS_ERANGE ? 429
                                              : 500,
                           rc == PRS_EINVAL   ? "bad_request"
                           : rc == PRS_ERANGE ? "too_many_clusters"
                                              : "internal",
                           err.msg);
    srv_log(s, PRS_LOG_INFO, "msg=cluster_created cluster=%s instances=%d gpus=%d", cl->id,
            cl->spec.n_inst, cl->spec.gpus);
    json_t *o = json_pack("{s:s, s:s, s:b}", "cluster_id", cl->id, "token", token, "has_profile",
                          cl->caps != NULL);
    cluster_unpin(s->clusters, cl);
    return reply_json(c, cc, 201, o);
}

static enum MHD_Result post_load(prs_server *s, struct MHD_Connection *c, conn_ctx *cc, cluster *cl)
{
    double rates[PRS_INFER_NCLASS], at;
    prs_error err = {0};
    if (cluster_load_parse(cc->body ? cc->body : "", cc->len, rates, &at, &err))
        return reply_error(s, c, cc, 400, "bad_request", err.msg);
    int rc = cluster_report_load(cl, rates, at >= 0 ? at : (double)time(NULL), &err);
    prs_error serr = {0};
    if (cluster_store_load(s, cl, &serr) != 0)
        return reply_error(s, c, cc, 500, "storage", serr.msg);
    if (rc == PRS_ERANGE || rc == PRS_EINVAL)
        return reply_error(s, c, cc, 422, "unplannable", err.msg);
    if (rc) return reply_error(s, c, cc, 500, "internal", err.msg);
    return reply_json(c, cc, 200, cluster_desired_json(cl));
}

static enum MHD_Result put_profile(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                                   cluster *cl)
{
    prs_error err = {0};
    if (!cc->body || cc->len == 0)
        return reply_error(s, c, cc, 400, "bad_request", "profile: empty body (the profile CSV)");
    int rc = cluster_set_profile(cl, cc->body, cc->len, &err);
    if (rc)
        return reply_error(s, c, cc, rc == PRS_EINVAL ? 400 : 500,
                           rc == PRS_EINVAL ? "bad_profile" : "internal", err.msg);
    if (cluster_store_profile(s, cl, &err) != 0)
        return reply_error(s, c, cc, 500, "storage", err.msg);
    return reply_json(c, cc, 200, cluster_state_json(cl));
}

enum MHD_Result handle_cluster(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m)
{
    enum MHD_Result answer = MHD_NO;
    prs_error err = {0};
    cluster *cl = cluster_for(s, c, cc, m, &answer);
    if (!cl) return answer;
    switch (m->route) {
    case R_CLUSTER_GET:
        answer = reply_json(c, cc, 200, cluster_state_json(cl));
        break;
    case R_CLUSTER_DESIRED:
        answer = reply_json(c, cc, 200, cluster_desired_json(cl));
        break;
    case R_CLUSTER_LOAD:
        answer = post_load(s, c, cc, cl);
        break;
    case R_CLUSTER_PROFILE:
        answer = put_profile(s, c, cc, cl);
        break;
    case R_CLUSTER_DELETE:
        if (cluster_store_delete(s, cl->id, &err) != 0) {
            answer = reply_error(s, c, cc, 500, "storage", err.msg);
            break;
        }
        cluster_delete(s->clusters, cl);
        srv_log(s, PRS_LOG_INFO, "msg=cluster_deleted cluster=%s", cl->id);
        answer =
            reply_json(c, cc, 200, json_pack("{s:s, s:b}", "cluster_id", cl->id, "deleted", 1));
        break;
    default:
        answer = reply_error(s, c, cc, 500, "internal", "unrouted cluster request");
        break;
    }
    cluster_unpin(s->clusters, cl);
    return answer;
}
