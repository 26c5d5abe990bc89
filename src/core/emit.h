/* The planner's points on their way out (emit.c): each point's plan is picked (pick.h) on
 * worker threads, several points at once, and the results are handed back in the order the
 * points came in, on the thread that submits them. Module prefix prs__emit_. */
#ifndef PRS_EMIT_H
#define PRS_EMIT_H

#include "pick.h"

typedef struct prs__emit prs__emit;

/* The memory the points in flight may take by default (bytes). */
#define PRS__EMIT_BYTES (64L << 20)

/* One point as submitted, with its plans; when chg_op is set, the clocks of out->best that
 * differ from the point before's: op chg_op[k] at chg_freq[k] MHz, k < nchg. */
typedef struct prs__emit_point {
    long planned; /* critical path of the relaxed plan, units */
    double delta; /* its step's cost change */
    const prs__pick_out *out;
    const int *chg_op, *chg_freq;
    int nchg;
} prs__emit_point;

/* Called for every point, in order, on the submitting thread; non-zero stops the run (the
 * code is returned by prs__emit_submit / prs__emit_flush). */
typedef int (*prs__emit_deliver)(void *ud, const prs__emit_point *p);

/* threads: the threads that pick plans, the submitting one included (1: none is started, every
 * point is picked when it is submitted). Fewer are used when starting one fails. max_bytes:
 * what the points in flight may take (0: PRS__EMIT_BYTES); at least two points are held
 * whatever it says. NULL when out of memory. */
prs__emit *prs__emit_new(const prs__pick_shared *sh, int threads, long max_bytes,
                         prs__emit_deliver deliver, void *ud);
/* Stops the threads (points not delivered yet are dropped) and frees. */
void prs__emit_free(prs__emit *e);
/* Stops and joins the worker threads (points not delivered yet are dropped; a worker stops
 * between two points): prs__emit_count is then exact whenever the run ended, and submit and
 * flush return PRS_ECANCELED. */
void prs__emit_stop(prs__emit *e);
/* Queue a point (arguments as prs__pick_point; changed: idx differs from the last point's).
 * After a deliver callback failed, submit and flush return its code and deliver nothing.
 * ch_op: the nch ops whose duration or clock may differ from the last point's (NULL: any).
 * With worker threads the inputs are copied (all of them where a job starts, else those ops'),
 * and points before it may be delivered meanwhile; without, it is picked and delivered now
 * (idx must then stay as it is until a point with changed set). 0, or what the deliver
 * callback returned. */
int prs__emit_submit(prs__emit *e, const int *idx, int changed, const long *dur, int nch,
                     const int *ch_op, long planned, double delta);
/* Deliver every point submitted. 0, or what the deliver callback returned. */
int prs__emit_flush(prs__emit *e);
/* Adds what the picking did to st (stop the threads first unless every point was
 * delivered). */
void prs__emit_count(const prs__emit *e, prs_plan_stats *st);
/* The threads to use when the caller asks for 0: the processors online, at most
 * PRS_PLAN_MAX_THREADS. */
int prs__emit_default_threads(void);

#endif
