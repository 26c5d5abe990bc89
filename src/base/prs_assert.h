/* PRS_ASSERT(cond): an internal invariant, checked in debug builds (NDEBUG not defined: the
 * Debug and sanitizer builds), where a broken one prints where and what to stderr and aborts;
 * compiled out of optimised builds, where cond is still type-checked but never evaluated, so it
 * must have no side effect. For invariants of the code only: bad input (a request, a file, a
 * command line) is refused with an error, never asserted. Internal to the project, not part of
 * the public headers. */
#ifndef PRS_BASE_PRS_ASSERT_H
#define PRS_BASE_PRS_ASSERT_H

#ifdef NDEBUG
#define PRS_ASSERT(cond) ((void)sizeof(!(cond)))
#else
#include <stdio.h>
#include <stdlib.h>
#define PRS_ASSERT(cond)                                                                           \
    ((cond) ? (void)0                                                                              \
            : (fprintf(stderr, "%s:%d: %s: invariant broken: %s\n", __FILE__, __LINE__, __func__,  \
                       #cond),                                                                     \
               abort()))
#endif

#endif
