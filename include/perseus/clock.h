/* The monotonic clock every part of Perseus times itself with (deadlines, timeouts, samples):
 * CLOCK_MONOTONIC, which never jumps when the wall clock is set. One helper, so no part keeps its
 * own copy. Part of the base library (perseus_base), which the core, the GPU backends, the client
 * and perseus-gpud all link. */
#ifndef PERSEUS_CLOCK_H
#define PERSEUS_CLOCK_H

#include "perseus/export.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in seconds (tv_sec + 1e-9 * tv_nsec), and in whole nanoseconds. */
PRS_API double prs_mono_s(void);
PRS_API int64_t prs_mono_ns(void);

/* Timed waits on this clock, which a wall-clock step (NTP, an operator) cannot stretch or cut
 * short: prs_sync_init_mono initialises a mutex and a condition variable that measures its
 * timeouts on CLOCK_MONOTONIC (0, or an errno value with neither made), and prs_mono_timespec
 * gives t seconds as a timespec: an absolute time in prs_mono_s's seconds, as
 * pthread_cond_timedwait wants it, or a duration for nanosleep (t < 0 and NaN count as 0). */
PRS_API int prs_sync_init_mono(pthread_mutex_t *mu, pthread_cond_t *cv);
PRS_API struct timespec prs_mono_timespec(double t);

#ifdef __cplusplus
}
#endif
#endif
