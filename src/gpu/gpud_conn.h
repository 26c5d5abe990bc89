/* Internal to the GPU layer: a client's connection to perseus-gpud (docs/gpud.md), the per-node
 * daemon that owns clock changes, or to a private instance of it spawned for one process.
 *
 * Set-up is synchronous (hello, lease, the clock list). Then clock requests are asynchronous: a
 * request is one non-blocking send of a "SET seq mhz" line and costs no round trip; a reader
 * thread takes the daemon's acknowledgements as they come and keeps the state they describe (the
 * clock in effect, the last request answered, the failures), and a caller that must know waits
 * for the answer to its request. Sends never raise SIGPIPE: a daemon that went away makes later
 * requests fail (and counted), nothing else. */
#ifndef PRS_GPUD_CONN_H
#define PRS_GPUD_CONN_H

#include <stddef.h>
#include <sys/types.h>

#include "perseus/error.h"

typedef struct prs__gpu_conn prs__gpu_conn;

/* What the daemon answered to one clock request. */
typedef enum prs__gpu_ack_status {
    PRS__GPU_ACK_NONE = 0,   /* not answered (yet) */
    PRS__GPU_ACK_OK,         /* applied and read back */
    PRS__GPU_ACK_SAME,       /* already in effect */
    PRS__GPU_ACK_SUPERSEDED, /* a later request replaced it before it was applied */
    PRS__GPU_ACK_REFUSED,    /* the driver refused: the clock in effect is unchanged */
    PRS__GPU_ACK_MISMATCH,   /* the driver said yes but the read-back clock is not the lock */
    PRS__GPU_ACK_LOST        /* the connection is gone */
} prs__gpu_ack_status;

/* Connect to the daemon's socket at path. */
int prs__gpu_conn_connect(const char *path, prs__gpu_conn **out, prs_error *err);
/* Adopt a connected socket (a private daemon started by us, whose pid is helper_pid: reaped by
 * prs__gpu_conn_close). */
int prs__gpu_conn_adopt(int fd, pid_t helper_pid, prs__gpu_conn **out, prs_error *err);
/* HELLO, then LEASE uuid: the GPU is ours until the connection closes. Synchronous, before
 * prs__gpu_conn_start. A refusal (denied, busy, no such GPU) is PRS_EGPU with the daemon's words.
 */
int prs__gpu_conn_lease(prs__gpu_conn *c, const char *uuid, double timeout_s, prs_error *err);
/* Start the reader thread: from here on, requests are asynchronous. */
int prs__gpu_conn_start(prs__gpu_conn *c, prs_error *err);

/* Send a clock request (mhz 0: the default clocks). Never blocks: when the socket is full the
 * request waits in a small buffer, sent first next time. Returns its sequence number (> 0), or
 * PRS_EGPU when the connection is gone. */
long prs__gpu_conn_set(prs__gpu_conn *c, int mhz);
/* Send what is buffered and wait (at most timeout_s) until request seq is answered. Returns its
 * status (the latest answer's when seq was not the latest) and the daemon's message in msg. */
prs__gpu_ack_status prs__gpu_conn_wait(prs__gpu_conn *c, long seq, double timeout_s, char *msg,
                                       size_t n);
/* The last request sent (0: none). */
long prs__gpu_conn_last_seq(const prs__gpu_conn *c);
/* What request seq (> 0) left in effect: 1 with *in_effect the clock (0: default) once it is
 * answered, -1 in *in_effect when that is unknown (superseded, the connection lost, the answer
 * too old to be kept); 0 while it is not answered yet. *at_s (when not NULL): prs_mono_s when the
 * answer arrived, which the change took effect before (NAN when no answer is kept for seq). */
int prs__gpu_conn_answer(prs__gpu_conn *c, long seq, int *in_effect, double *at_s);
/* The clock in effect as the daemon last said (0: default), and -1 while requests are not all
 * answered yet (then nobody knows). */
int prs__gpu_conn_confirmed(const prs__gpu_conn *c);
/* Requests that did not take (refused, mismatch, or unanswered because the connection is gone). */
long prs__gpu_conn_failures(const prs__gpu_conn *c);
/* The daemon-side time of the last applied request, nanoseconds (0: none). */
long prs__gpu_conn_apply_ns(const prs__gpu_conn *c);
/* The connection is gone (the reader saw its end). */
int prs__gpu_conn_lost(const prs__gpu_conn *c);
/* A lost connection to a node daemon (not a private helper's) made anew in place: connect to
 * path, HELLO, LEASE uuid (at most timeout_s each), start a reader. The GPU is then at its
 * default clocks (the daemon reset it when the old lease ended); requests not sent are dropped;
 * counts (failures, sequence numbers) go on. Call from the thread that sends. 0, or an error
 * (the connection stays lost). */
int prs__gpu_conn_reconnect(prs__gpu_conn *c, const char *path, const char *uuid, double timeout_s,
                            prs_error *err);
/* Close (the daemon resets the clocks of the lease), stop the reader, reap a private helper
 * (waiting at most timeout_s, then SIGKILL). NULL is a no-op. */
void prs__gpu_conn_close(prs__gpu_conn *c, double timeout_s);

#endif
