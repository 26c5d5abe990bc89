/* A fixed pool of threads that run queued calls in the order they arrive. perseusd hands it the
 * requests with large bodies, so that parsing and storing them never holds up the HTTP workers'
 * other connections (http_request.c, 'Requests with large bodies').
 *
 * The caller owns each queued item (embedded in its own state), so queueing cannot fail and
 * allocates nothing. Errors: 0 or a negative PRS_E* code with details in a prs_error. */
#ifndef PRS_SERVER_WORKQ_H
#define PRS_SERVER_WORKQ_H

#include "perseus/error.h"

typedef struct workq workq;

typedef struct workq_item {
    void (*fn)(void *arg);
    void *arg;
    struct workq_item *next;
} workq_item;

/* A pool of nthreads (>= 1) threads, each niced by `nice` (0: as the caller; Linux gives each
 * thread its own nice value): bulk work at a lower priority leaves the CPU to latency-sensitive
 * threads first when the machine is busy. */
int workq_start(int nthreads, int nice, workq **out, prs_error *err);
/* Queue fn(arg) through the caller's item, which must stay valid until fn has run. */
void workq_push(workq *q, workq_item *it, void (*fn)(void *arg), void *arg);
/* Run everything still queued, join the threads and free the pool (NULL: nothing). */
void workq_stop(workq *q);

#endif
