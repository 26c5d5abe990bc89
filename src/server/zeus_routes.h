/* perseusd's Zeus-compatible routes (docs/api.md, "Zeus-compatible routes"): the routes of the
 * SOSP'24 artifact's server and of Zeus master's pipeline-frequency server, each Zeus job backed
 * by an ordinary v1 job of the same server. server.c hands every request it has no route for to
 * zeus_dispatch, and frees what it left on the connection with zeus_request_done. */
#ifndef PRS_SERVER_ZEUS_ROUTES_H
#define PRS_SERVER_ZEUS_ROUTES_H

#include <stddef.h>

#include <microhttpd.h>

#include "perseus/error.h"
#include "perseus/server.h"

typedef struct zeus_srv zeus_srv;

/* Start the routes' thread for a server reached at v1_base_url (e.g. "http://127.0.0.1:7787";
 * https: the server's own certificate is not checked on loopback) with creation token
 * cfg->create_token (NULL: none; a copy is kept, the routes create v1 jobs with it) and cfg->zeus
 * as in perseus/server.h (the profile file is read now).
 * 0 and *out, or PRS_EINVAL / PRS_EIO / PRS_ENOMEM with err saying why. */
int zeus_start(const prs_server_config *cfg, const char *v1_base_url, zeus_srv **out,
               prs_error *err);

/* Answer every request still waiting (503) and stop the thread; call while the HTTP workers
 * still run, so that the answers go out. Requests after it are answered 503 at once. NULL:
 * nothing. */
void zeus_stop(zeus_srv *z);

/* Free the routes (stopping them first if need be), once no HTTP worker runs. NULL: nothing. */
void zeus_free(zeus_srv *z);

/* A complete request (body[0..len)) that server.c has no route for. 0: not a Zeus route (the
 * caller answers 404). 1: handled, *ret what on_request returns; the request may have been
 * suspended and its context left in *req, which the next call for the same connection (after
 * the resume, which writes 1 to wake_fd) answers. *status: the HTTP status once answered. */
int zeus_dispatch(zeus_srv *z, struct MHD_Connection *c, const char *url, const char *method,
                  const char *body, size_t len, int wake_fd, void **req, int *status,
                  enum MHD_Result *ret);

/* Free what zeus_dispatch left in *req (the request ended). */
void zeus_request_done(void *req);

#endif
