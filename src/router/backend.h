/* One request forwarded to a serving instance (backend.c): a libcurl transfer owned by the
 * client connection's thread, pumped on demand, so bytes flow from the instance to the client
 * only as fast as the client reads them and nothing is buffered beyond one read's worth. Freeing
 * it closes the connection to the instance whatever state the transfer is in. */
#ifndef PRS_ROUTER_BACKEND_H
#define PRS_ROUTER_BACKEND_H

#include <stddef.h>
#include <sys/types.h>

#include "perseus/error.h"

typedef struct prs_backend prs_backend;

/* Connections to the instances kept open between requests and shared by every thread (a libcurl
 * share of the connection cache, under mutexes): a request reuses an idle connection to its
 * instance instead of opening one. A transfer freed before its end closes its connection, so an
 * instance always sees a departed client. */
typedef struct prs_backend_pool prs_backend_pool;
int prs__backend_pool_new(prs_backend_pool **out, prs_error *err);
/* After every transfer using it is freed. NULL is a no-op. */
void prs__backend_pool_free(prs_backend_pool *p);

/* POST body[len] (copied) as JSON to url, on a connection of pool (NULL: a connection of its
 * own). timeout_s bounds the connection and any silence of the instance. PRS_ENOMEM on failure. */
int prs__backend_start(prs_backend_pool *pool, const char *url, const char *body, size_t len,
                       double timeout_s, prs_backend **out, prs_error *err);
/* Pump until the response's status line and headers are in. PRS_ESERVER (with curl's reason)
 * when the instance cannot be reached or fails before answering. */
int prs__backend_head(prs_backend *b, long *status, prs_error *err);
/* The response's Content-Type ("" when none); valid while b lives. */
const char *prs__backend_content_type(const prs_backend *b);
/* Up to max body bytes into buf: the count, 0 at the end of the body, or PRS_ESERVER when the
 * transfer broke (err says why). Blocks until bytes arrive. */
ssize_t prs__backend_read(prs_backend *b, char *buf, size_t max, prs_error *err);
void prs__backend_free(prs_backend *b);

#endif
