/* Requests forwarded to serving instances (backend.c): one thread runs one libcurl multi handle
 * over epoll (and the clients' HTTP server beside it) and drives every transfer at once, keeping
 * the connections to the instances open between requests (keep-alive) so a request reuses an idle
 * one instead of opening its own.
 *
 * A transfer has an owner (the client connection's side, on this thread or another) that reads what
 * the instance answered through the calls below. The answer is held in the transfer's buffer: a
 * stream (a request with "stream", answered 200) holds at most PRS_BACKEND_STREAM_HOLD bytes, and
 * the instance is paused (TCP back-pressure) until the owner takes them, so bytes flow only as
 * fast as the client reads; any other answer is held whole (at most PRS_BACKEND_WHOLE_MAX bytes:
 * a larger one breaks the transfer). The owner never blocks: when what it needs is not in yet, it
 * arms the transfer (prs__backend_arm) and is called back once, from the loop's thread, when it
 * is. Freeing a transfer before its end closes its connection, so an instance always sees a
 * departed client. */
#ifndef PRS_ROUTER_BACKEND_H
#define PRS_ROUTER_BACKEND_H

#include <stddef.h>
#include <sys/types.h>

#include "perseus/error.h"

#define PRS_BACKEND_STREAM_HOLD (64u << 10)
#define PRS_BACKEND_WHOLE_MAX (64u << 20)

typedef struct prs_backend_loop prs_backend_loop;
typedef struct prs_backend prs_backend;

/* What the owner waits for (prs__backend_arm). */
typedef enum {
    PRS_BACKEND_WANT_HEAD, /* the status line and headers, or a failure before them */
    PRS_BACKEND_WANT_DATA, /* bytes to read, or the end */
    PRS_BACKEND_WANT_END   /* the end of the transfer, whichever way */
} prs_backend_want;

/* A loop with at most max_conns connections to the instances at once, those kept idle for reuse
 * included; its thread starts with prs__backend_loop_run. */
int prs__backend_loop_new(unsigned max_conns, prs_backend_loop **out, prs_error *err);

/* Another event source served by the loop's thread (the HTTP server of the clients): run(cls)
 * is called when fd is readable, when timeout_ms(cls) milliseconds (-1: none) have passed, and
 * after owners were called back; owners called by it (on the loop's thread) have their calls
 * here carried out right after it returns. One thread for both sides: no wake-up of another
 * thread on the way of a byte. */
typedef struct prs_backend_host {
    int fd;
    void (*run)(void *cls);
    long (*timeout_ms)(void *cls);
    void *cls;
} prs_backend_host;
/* Start the loop's thread, serving host too (NULL: none). */
int prs__backend_loop_run(prs_backend_loop *l, const prs_backend_host *host, prs_error *err);
/* Stop the thread: every transfer not ended ends with an error ("the router is stopping") and
 * its armed owner is called back (from this thread); none starts any more. Transfers stay valid
 * until freed. */
void prs__backend_loop_stop(prs_backend_loop *l);
/* After prs__backend_loop_stop: frees the loop and every transfer, freed by its owner or not.
 * NULL is a no-op. */
void prs__backend_loop_free(prs_backend_loop *l);
/* Connections opened to instances so far (a reused one is not counted again). */
unsigned long prs__backend_loop_connects(prs_backend_loop *l);

/* POST body[len] (copied) as JSON to url. timeout_s bounds the connection and any silence of the
 * instance while the owner is reading. stream: the client asked for a stream. wake(wake_cls) is
 * the owner's call-back (prs__backend_arm). PRS_ENOMEM on failure. */
int prs__backend_start(prs_backend_loop *l, const char *url, const char *body, size_t len,
                       double timeout_s, int stream, void (*wake)(void *), void *wake_cls,
                       prs_backend **out, prs_error *err);
/* 1 when what the owner wants is in already (no call-back then); 0 when the owner is called back
 * once it is. At most one arming at a time; an arming is spent by its call-back. */
int prs__backend_arm(prs_backend *b, prs_backend_want want);
/* While the owner is armed, the loop also watches fd, the socket of the owner's peer (the
 * client, whose connection the owner holds): when the peer closes it (or it fails), the owner is
 * called back as if what it armed for were in, and prs__backend_peer_gone says so. Bytes the
 * peer sends meanwhile are left alone, and the watch ends with the arming (the call-back, or
 * prs__backend_free). Call it after prs__backend_arm returned 0; no-op when not armed. fd must
 * stay open while armed. */
void prs__backend_watch_peer(prs_backend *b, int fd);
/* 1 when the watched peer left (prs__backend_watch_peer). */
int prs__backend_peer_gone(prs_backend *b);
/* 1 when what want waits for is in, without arming. */
int prs__backend_ready(prs_backend *b, prs_backend_want want);
/* The head: 0 with *status when it is in; 1 when not yet; PRS_ESERVER (with the reason) when the
 * instance could not be reached or failed before answering. */
int prs__backend_head(prs_backend *b, long *status, prs_error *err);
/* The response's Content-Type ("" when none), once the head is in. */
const char *prs__backend_content_type(const prs_backend *b);
/* Up to max bytes of the answer into buf: the count (0 when none are in yet, or at the end:
 * *end is set then), or PRS_ESERVER when the transfer broke (err says why). */
ssize_t prs__backend_read(prs_backend *b, char *buf, size_t max, int *end, prs_error *err);
/* The transfer's owner is done with it: ended or not, the loop frees it. NULL is a no-op. */
void prs__backend_free(prs_backend *b);

#endif
