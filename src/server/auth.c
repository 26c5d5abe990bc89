/* Who may do what: bearer tokens (the job's own, the administrator's, the creation and metrics
 * tokens), kept by the server only as SHA-256 and compared in constant time. */
#include <string.h>
#include <strings.h>

#include "http.h"

/* Hash the presented bearer token (before taking the server lock: hashing is the costly part);
 * 0 if there is none. */
int auth_bearer_hash(struct MHD_Connection *c, uint8_t hash[SECURE_SHA256_LEN])
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    /* The scheme is case-insensitive (RFC 9110, 11.1), followed by one or more spaces. */
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 0;
    const char *tok = h + 6;
    while (*tok == ' ' || *tok == '\t')
        tok++;
    secure_sha256(tok, strlen(tok), hash);
    return 1;
}

int auth_job_owner(int have_token, const uint8_t hash[SECURE_SHA256_LEN], const job *j)
{
    return have_token && secure_equal(hash, j->token_hash, SECURE_SHA256_LEN);
}

/* Whether a job creation may go on: the server has no creation token, or the request presents
 * it (compared as SHA-256, in constant time). */
int auth_create_allowed(prs_server *s, struct MHD_Connection *c)
{
    uint8_t presented[SECURE_SHA256_LEN];
    if (!s->has_create_token) return 1;
    return auth_bearer_hash(c, presented) &&
           secure_equal(presented, s->create_hash, SECURE_SHA256_LEN);
}

/* Whether the presented token is the administrator's (--admin-token). */
int auth_is_admin(const prs_server *s, int have_token, const uint8_t hash[SECURE_SHA256_LEN])
{
    return have_token && s->has_admin_token && secure_equal(hash, s->admin_hash, SECURE_SHA256_LEN);
}

int auth_may_act(const prs_server *s, route_auth auth, int have_token,
                 const uint8_t hash[SECURE_SHA256_LEN], const job *j)
{
    if (auth_job_owner(have_token, hash, j)) return 1;
    return auth == AUTH_JOB_OR_ADMIN && auth_is_admin(s, have_token, hash);
}

int auth_metrics_allowed(prs_server *s, struct MHD_Connection *c)
{
    uint8_t presented[SECURE_SHA256_LEN];
    if (!s->has_metrics_token) return 1;
    return auth_bearer_hash(c, presented) &&
           secure_equal(presented, s->metrics_hash, SECURE_SHA256_LEN);
}
