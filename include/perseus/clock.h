/* The monotonic clock every part of Perseus times itself with (deadlines, timeouts, samples):
 * CLOCK_MONOTONIC, which never jumps when the wall clock is set. One helper, so no part keeps its
 * own copy. Part of the base library (perseus_base), which the core, the GPU backends, the client
 * and perseus-gpud all link. */
#ifndef PERSEUS_CLOCK_H
#define PERSEUS_CLOCK_H

#include "perseus/export.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in seconds (tv_sec + 1e-9 * tv_nsec), and in whole nanoseconds. */
PRS_API double prs_mono_s(void);
PRS_API int64_t prs_mono_ns(void);

#ifdef __cplusplus
}
#endif
#endif
