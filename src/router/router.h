/* perseus-router's server (router.c): the OpenAI-compatible front, the forwarding with retries
 * on other instances, the measurements taken from the streams, and /metrics. docs/router.md. */
#ifndef PRS_ROUTER_ROUTER_H
#define PRS_ROUTER_ROUTER_H

#include "perseus/error.h"
#include "router_config.h"

typedef struct prs_router prs_router;

/* A router over cfg, whose contents it takes (cfg is left empty). */
int prs__router_new(prs_router_config *cfg, prs_router **out, prs_error *err);
/* Start serving on listen (HOST:PORT); *port gets the port. */
int prs__router_listen(prs_router *r, const char *listen, int *port, prs_error *err);
/* Stop serving (connections in flight are closed) and free everything. */
void prs__router_free(prs_router *r);

#endif
