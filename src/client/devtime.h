/* Internal to the client: measurement on a device stream (devtime.c enqueues on the training
 * thread, resolve.c turns completed iterations into reports). */
#ifndef PRS_CLIENT_DEVTIME_H
#define PRS_CLIENT_DEVTIME_H

#include <stdatomic.h>

#include "attrib.h"
#include "perseus/client.h"
#include "perseus/stream.h"
#include "refresh.h"
#include "sampler.h"

/* A host function's record: written by the driver's thread, read after the stream passed it. */
typedef struct prs__client_hostcall {
    struct prs_client *c;
    int mhz;         /* clock to apply (clock calls) */
    int result;      /* 0 or the controller's error */
    int in_effect;   /* clock calls: clock in effect after it, or -1 with request > 0 (what
                      * the answer to that request says); anchors: the controller's confirmed
                      * clock when it ran (0: default, -1: ?) */
    long request;    /* clock calls: the controller's request to ask about (0: none) */
    int before_op;   /* an iteration's closing changes: how many of its computations came
                      * before it in the stream */
    double host_s;   /* anchors: CLOCK_MONOTONIC when it ran */
    double enq_s;    /* anchors: CLOCK_MONOTONIC when it was enqueued */
    atomic_int done; /* set (release) when it ran */
    struct prs__client_hostcall *next; /* free list */
} prs__client_hostcall;

typedef struct prs__client_devop {
    prs_instr instr;
    int microbatch;
    int chunk;                    /* global model chunk, -1: unknown */
    int local_chunk;              /* as the hook gave it */
    int other;                    /* other work (prs_client_other_begin): its own kind */
    prs__client_hostcall *change; /* clock change enqueued just before it, or NULL */
    prs_event *b, *e;
} prs__client_devop;

/* One iteration in flight. start/anchor open it; end is the next one's start. */
typedef struct prs__client_pend {
    long iteration, round, plan_id;
    double wall_s; /* host wall-clock time since the previous iteration ended (0: none) */
    int profiling, bad_order, phase_reportable;
    int open_closed;   /* its last computation's window was left open, closed at its end: what ran
                        * from its begin on is unknown (resolve.c's feed) */
    int resolved;      /* times computed (below) */
    int failed;        /* its device times could not be read: reported as a failure */
    int clock_checked; /* 1: its clock readings checked (resolve.c, check_clock); 2: one off */
    prs_event *start, *end;
    prs__client_hostcall *anchor;
    prs__client_hostcall *end_anchor; /* the next one's anchor, before end (it owns both) */
    prs__client_hostcall *closing;    /* clock changes no computation carries, in stream order */
    int n_ops, cap_ops;
    prs__client_devop *ops;
    /* filled when resolved */
    double t_start, t_end; /* host clock */
    int drained;           /* the stream ran dry before the host ended it (resolve.c) */
    double *op_t0, *op_t1; /* host clock, n_ops each (one allocation) */
    int *op_clock;
    struct prs__client_pend *next;
} prs__client_pend;

/* The attribution of one profiling round. */
typedef struct prs__client_round_fit {
    long round;
    int n_kinds;
    prs__client_attrib *fit;
    double t_first, t_last; /* host clock: the first fed iteration's start, the last one's end */
    long fed;               /* iterations fed */
    int below;              /* clock readings below the computations' clocks during them */
    int throttled;     /* PRS__CLIENT_THROTTLE_READS of them: no windows from then on (resolve.c) */
    int restarts;      /* times the fit started again, poor past the round's bound (resolve.c) */
    double poor_since; /* t_last when the fit was first found poor past the bound (0: not) */
    int told;          /* the fit held the round's reports past its bound, and stderr said why */
} prs__client_round_fit;

/* Device time a profiling round's fit may take to reach the per-kind criterion: past it, the
 * round's iterations are reported with the fit as it is and its relative standard error (the
 * server asks for more iterations at that clock while it is above the criterion), rather than
 * waited for forever (short computations against a slow counter may never settle). */
#define PRS__CLIENT_ROUND_BOUND_S 60.0

/* How long an iteration waits to be resolved for perseus-gpud's answers to its clock changes
 * (counted from its start; then its computations' clocks are unknown). */
#define PRS__CLIENT_ANSWER_WAIT_S 5.0

#define PRS__CLIENT_MAX_FITS 4
#define PRS__CLIENT_CLOCK_READS 1024  /* SM clock readings kept */
#define PRS__CLIENT_CLOCK_POLL_S 0.01 /* the sampler reads the SM clock at most this often */
/* Clock readings below the tagged clock during a round's computations that refuse its windows
 * from then on (one refuses its own iteration's): more than one, so that a read-back lagging a
 * clock change (an earlier, lower clock read just after the lock) refuses no round. */
#define PRS__CLIENT_THROTTLE_READS 2
#define PRS__CLIENT_HISTORY 4096

typedef struct prs__client_dev {
    prs_stream *stream;
    prs__client_sampler *sampler;
    int requested;         /* clock last requested in stream order (0: default) */
    int eff_mhz;           /* clock in effect after the last resolved iteration (0: default) */
    double eff_since_s;    /* host time it took effect by (its answer's arrival; 0: before) */
    prs__client_pend *cur; /* the iteration being enqueued */
    prs__client_pend *head, *tail; /* ended, not yet reported (FIFO) */
    int n_pend;
    prs_event **free_ev;
    int n_free_ev, cap_free_ev;
    prs__client_hostcall *free_calls;
    prs__client_round_fit fits[PRS__CLIENT_MAX_FITS];
    prs__client_refresh refresh; /* when the counter's values were taken */
    /* Recent counter readings (energy, cumulative J; power samples integrated) for the
     * iterations' energies outside profiling: a ring, oldest first. */
    double hist_t[PRS__CLIENT_HISTORY], hist_e[PRS__CLIENT_HISTORY];
    int hist_head, hist_len;
    double last_power_t, last_power_w, power_energy; /* integrating power samples */
    /* The SM clock read back by the sampler (a ring, oldest first): a profiling round whose
     * computations ran below the clock they are tagged with (the GPU's power limit held it
     * back) reports no windows from then on. */
    double clk_t[PRS__CLIENT_CLOCK_READS];
    int clk_mhz[PRS__CLIENT_CLOCK_READS];
    int clk_head, clk_len;
    double clk_end;       /* the latest reading's instant (0: none) */
    long throttled;       /* profiling iterations reported without windows for it */
    double chain_end;     /* host time the last resolved iteration ended (0: none) */
    double round_bound_s; /* PRS__CLIENT_ROUND_BOUND_S (tests shorten it) */
    double answer_wait_s; /* PRS__CLIENT_ANSWER_WAIT_S (tests lengthen it) */
} prs__client_dev;

struct prs_client;
int prs__client_dev_open(struct prs_client *c, prs_stream *stream, prs_gpu *sampler_gpu,
                         prs_error *err);
void prs__client_dev_close(struct prs_client *c);
int prs__client_dev_begin(struct prs_client *c, prs_instr instr, int microbatch, int chunk);
int prs__client_dev_end(struct prs_client *c, prs_instr instr, int microbatch, int chunk);
/* Other work's window (prs_client_other_begin/end): an op marked other, no clock change, no
 * order check. */
int prs__client_dev_other_begin(struct prs_client *c);
int prs__client_dev_other_end(struct prs_client *c);
int prs__client_dev_iteration_end(struct prs_client *c, double wall_s);
int prs__client_dev_request_clock(struct prs_client *c, int mhz);
/* devpool.c */
prs_event *prs__client_event_get(struct prs_client *c);
void prs__client_event_put(struct prs_client *c, prs_event *e);
prs__client_hostcall *prs__client_call_get(struct prs_client *c);
void prs__client_call_put(struct prs_client *c, prs__client_hostcall *h);
prs__client_pend *prs__client_pend_new(void);
/* resolve.c */
void prs__client_dev_push(struct prs_client *c, prs__client_pend *p);
/* Report what completed; force: wait for the oldest iteration and report it even without a
 * usable fit (FIFO full, shutdown). */
void prs__client_dev_poll(struct prs_client *c, int force);
/* The per-kind criterion of a profiling round's fit: the largest standard error / power a
 * computation kind's power may have before the round's bound (depends on the sampler's mode). */
double prs__client_dev_criterion(const struct prs_client *c);
/* Measure only: solve the fit of the current round (prs__client_attrib_solve's contract; no fit
 * yet: PRS__CLIENT_ATTRIB_MORE with q->why set). */
int prs__client_dev_solve(struct prs_client *c, double *kind_power_w, double *idle_power_w,
                          prs__client_attrib_quality *q);
/* devpool.c: frees p, its events and host calls back to the pools (its end event and anchor
 * belong to the next iteration). */
void prs__client_dev_pend_free(struct prs_client *c, prs__client_pend *p);

#endif
