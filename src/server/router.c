/* The route table: one row per route (method, path pattern, route id, handler, who may call it,
 * which body limit applies), matched by route_find and answered by route_dispatch. This is the
 * one place where a request's method and path are matched: a new route is a new row here.
 *
 * A path pattern is matched segment by segment: "{id}" matches a well-formed job id
 * (secure_is_id), "{dp}" a pipeline index (a decimal integer in [0, REQ_MAX_WORLD)), any other
 * segment itself. A known path asked with a method it does not serve is answered 405 by the
 * caller with the path's methods; its route is then the path's POST row if it has one (so a
 * body sent to it is bounded as that row's would be), else its first. */
#include "perseus/numfmt.h"

#include <stdio.h>
#include <string.h>

#include "http.h"
#include "prs_assert.h"
#include "request.h"

static const route_def ROUTES[] = {
    {"GET", "/healthz", R_HEALTHZ, handle_healthz, AUTH_NONE, 0},
    {"GET", "/metrics", R_METRICS, handle_metrics, AUTH_METRICS, 0},
    {"GET", "/v1/jobs", R_LIST, handle_list, AUTH_ADMIN, 0},
    {"POST", "/v1/jobs", R_CREATE, handle_create, AUTH_CREATE, 0},
    {"GET", "/v1/jobs/{id}", R_STATUS, handle_job, AUTH_JOB_OR_ADMIN, 0},
    {"DELETE", "/v1/jobs/{id}", R_DELETE, handle_job, AUTH_JOB_OR_ADMIN, 0},
    {"POST", "/v1/jobs/{id}/ranks", R_REGISTER, handle_job, AUTH_JOB, 0},
    {"GET", "/v1/jobs/{id}/schedule", R_SCHEDULE, handle_job, AUTH_JOB, 0},
    {"POST", "/v1/jobs/{id}/results", R_RESULTS, handle_job, AUTH_JOB, 0},
    {"POST", "/v1/jobs/{id}/stragglers", R_STRAGGLER_SET, handle_job, AUTH_JOB, 0},
    {"POST", "/v1/jobs/{id}/power_cap", R_POWER_CAP_SET, handle_job, AUTH_JOB, 0},
    {"DELETE", "/v1/jobs/{id}/power_cap", R_POWER_CAP_CLEAR, handle_job, AUTH_JOB, 0},
    {"GET", "/v1/jobs/{id}/frontier", R_FRONTIER, handle_job, AUTH_JOB, 0},
    {"POST", "/v1/jobs/{id}/complete", R_COMPLETE, handle_job, AUTH_JOB, 0},
    {"GET", "/v1/jobs/{id}/profile", R_PROFILE_GET, handle_job, AUTH_JOB, 0},
    {"POST", "/v1/jobs/{id}/profile", R_PROFILE_PUT, handle_job, AUTH_JOB, 1},
    {"DELETE", "/v1/jobs/{id}/stragglers/{dp}", R_STRAGGLER_CLEAR, handle_job, AUTH_JOB, 0},
    {"POST", "/v1/clusters", R_CLUSTER_CREATE, handle_cluster_create, AUTH_CREATE, 1},
    {"GET", "/v1/clusters/{cid}", R_CLUSTER_GET, handle_cluster, AUTH_CLUSTER_OR_ADMIN, 0},
    {"DELETE", "/v1/clusters/{cid}", R_CLUSTER_DELETE, handle_cluster, AUTH_CLUSTER_OR_ADMIN, 0},
    {"POST", "/v1/clusters/{cid}/loads", R_CLUSTER_LOAD, handle_cluster, AUTH_CLUSTER, 0},
    {"GET", "/v1/clusters/{cid}/desired", R_CLUSTER_DESIRED, handle_cluster, AUTH_CLUSTER_OR_ADMIN,
     0},
    {"POST", "/v1/clusters/{cid}/profile", R_CLUSTER_PROFILE, handle_cluster, AUTH_CLUSTER, 1},
};
#define N_ROWS (sizeof ROUTES / sizeof ROUTES[0])

/* Whether url matches pattern, segment by segment; the {id} and {dp} it holds into *m. */
static int path_matches(const char *pattern, const char *url, route_match *m)
{
    const char *p = pattern, *u = url;
    while (*p && *u) {
        if (*p != '/' || *u != '/') return 0;
        p++;
        u++;
        size_t plen = strcspn(p, "/"), ulen = strcspn(u, "/");
        if ((plen == 4 && strncmp(p, "{id}", 4) == 0) ||
            (plen == 5 && strncmp(p, "{cid}", 5) == 0)) { /* {cid}: a cluster id, same form */
            if (!secure_is_id(u, ulen)) return 0;
            memcpy(m->id, u, ulen);
            m->id[ulen] = '\0';
        } else if (plen == 4 && strncmp(p, "{dp}", 4) == 0) {
            char num[24];
            long dp;
            if (ulen == 0 || ulen >= sizeof num || u[0] < '0' || u[0] > '9') return 0;
            memcpy(num, u, ulen);
            num[ulen] = '\0';
            if (prs_num_parse_long(num, &dp) != 0 || dp < 0 || dp >= REQ_MAX_WORLD) return 0;
            m->dp = dp;
        } else if (plen != ulen || strncmp(p, u, plen) != 0) {
            return 0;
        }
        p += plen;
        u += ulen;
    }
    return *p == '\0' && *u == '\0';
}

void route_find(const char *method, const char *url, route_match *m)
{
    memset(m, 0, sizeof *m);
    m->route = R_UNKNOWN;
    m->dp = -1;
    const route_def *first = NULL, *post = NULL;
    size_t used = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        const route_def *d = &ROUTES[i];
        if (!path_matches(d->path, url, m)) continue;
        if (!first) first = d;
        if (strcmp(d->method, "POST") == 0) post = d;
        int n =
            snprintf(m->allow + used, sizeof m->allow - used, "%s%s", used ? ", " : "", d->method);
        if (n > 0 && (size_t)n < sizeof m->allow - used) used += (size_t)n;
        if (!m->method_ok && strcmp(d->method, method) == 0) {
            m->def = d;
            m->method_ok = 1;
        }
    }
    if (!first) return;
    if (!m->def) m->def = post ? post : first;
    m->route = m->def->route;
    m->has_id = strstr(m->def->path, "{id}") != NULL;
}

/* Why a route of this auth is refused before its handler (NULL: it may go on). The job routes'
 * tokens are checked by http_request.c and route_job.c, the creation token before the body. */
static const char *refusal(prs_server *s, struct MHD_Connection *c, route_auth auth)
{
    uint8_t presented[SECURE_SHA256_LEN];
    if (auth == AUTH_METRICS && !auth_metrics_allowed(s, c))
        return "/metrics needs the server's metrics token (Authorization: Bearer ...)";
    if (auth == AUTH_ADMIN && !auth_is_admin(s, auth_bearer_hash(c, presented), presented))
        return s->has_admin_token ? "listing jobs needs the server's admin token "
                                    "(Authorization: Bearer ...)"
                                  : "listing jobs needs an admin token, and the server has none "
                                    "(perseusd --admin-token-file)";
    return NULL;
}

enum MHD_Result route_dispatch(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *m)
{
    PRS_ASSERT(m->def && m->method_ok); /* unknown routes and methods are answered before */
    const char *why = refusal(s, c, m->def->auth);
    if (why) return reply_error(s, c, cc, 401, "unauthorized", why);
    return m->def->handler(s, c, cc, m);
}
