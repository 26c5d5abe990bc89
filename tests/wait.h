/* Waiting on a condition, never on the clock: a test that needs something to have happened (a
 * daemon serving, a sampler having taken enough samples, a job in a phase) polls for it with a
 * deadline, so it goes on as soon as the condition holds and a slow machine only makes it wait
 * longer. The deadline is far beyond what an idle machine needs: reaching it is a failure, which
 * the caller asserts right after the wait (the condition, evaluated once more).
 *
 *     PRS_WAIT_UNTIL(prs__client_sampler_reads(s) >= 200, 30);
 *     assert_true(prs__client_sampler_reads(s) >= 200);
 *
 * The only sleep is the poll interval, PRS_WAIT_POLL_S. Header-only. */
#ifndef PRS_TESTS_WAIT_H
#define PRS_TESTS_WAIT_H

#include <time.h>

#define PRS_WAIT_POLL_S 0.002 /* between two evaluations of the condition */

static inline double prs_wait_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleep one poll interval unless the deadline (CLOCK_MONOTONIC seconds) has passed: 1 when the
 * caller may evaluate its condition again, 0 when time is up. */
static inline int prs_wait_poll(double deadline_s)
{
    if (prs_wait_now_s() >= deadline_s) return 0;
    struct timespec ts = {0, (long)(PRS_WAIT_POLL_S * 1e9)};
    nanosleep(&ts, NULL);
    return 1;
}

/* Evaluate cond until it holds or limit_s seconds have passed. */
#define PRS_WAIT_UNTIL(cond, limit_s)                                                              \
    for (double prs_wait_deadline_ = prs_wait_now_s() + (limit_s);                                 \
         !(cond) && prs_wait_poll(prs_wait_deadline_);)

#endif
