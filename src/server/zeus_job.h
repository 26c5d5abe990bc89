/* The Zeus jobs behind perseusd's Zeus-compatible routes (zeus_job.c): each a v1 job of the same
 * server, reached over its own HTTP API, and the translation of every Zeus call into v1 calls.
 * Used by zeus_routes.c from its one thread only: nothing here locks. */
#ifndef PRS_SERVER_ZEUS_JOB_H
#define PRS_SERVER_ZEUS_JOB_H

#include <stddef.h>

#include <jansson.h>
#include <microhttpd.h>

#include "perseus/error.h"
#include "perseus/server.h"

enum zeus_route {
    ZR_INFO,
    ZR_REGISTER_JOB,
    ZR_REGISTER_RANK,        /* the artifact's: the job id in the body */
    ZR_REGISTER_RANK_MASTER, /* master's: /register_rank/{job} */
    ZR_SCHEDULE,
    ZR_RESULT,
    ZR_V1_JOB /* ours: the v1 job behind a Zeus job, with its token */
};

/* One request on its way: parsed on the HTTP worker, answered by the routes' thread. */
typedef struct zeus_req {
    struct MHD_Connection *conn;
    int wake_fd;
    enum zeus_route route;
    char job[256]; /* the path's job id, "" when none */
    long rank;     /* the schedule's ?rank= */
    json_t *body;  /* NULL for a GET */
    /* the answer, once ready */
    int ready, status;
    char *text;
    size_t len;
    struct zeus_req *next; /* in the routes' queue, or a job's barrier */
} zeus_req;

/* Answer a request: the JSON value v (stolen; a bare string or null too) with status, and give
 * the connection back to its HTTP worker. Implemented in zeus_routes.c. */
void zeus_answer(zeus_req *r, int status, json_t *v);

/* Answer {"detail": msg} with status (Zeus's servers' error shape). */
void zeus_fail(zeus_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct zeus_jobs zeus_jobs;

/* The jobs' table for a server reached at v1_base_url; the profile file is read now. 0, or a
 * PRS_E* code with err saying why. */
int zeus_jobs_new(const prs_server_config *cfg, const char *v1_base_url, zeus_jobs **out,
                  prs_error *err);
void zeus_jobs_free(zeus_jobs *t);

/* Handle a request: answered at once, or kept waiting in its job's barrier. */
void zeus_jobs_handle(zeus_jobs *t, zeus_req *r);

/* The /info answer (needs no job). */
json_t *zeus_jobs_info(const zeus_jobs *t);

/* Whether a job waits for its v1 job to reach running; zeus_jobs_poll then checks them (call it
 * every 100 ms or so while this is true). */
int zeus_jobs_waiting(const zeus_jobs *t);
void zeus_jobs_poll(zeus_jobs *t);

/* Answer every request kept waiting with 503 (the server stops). */
void zeus_jobs_abort(zeus_jobs *t);

#endif
