/* The stage-profile value's internals that its CSV reader (profile_csv.c) uses (profile.c). */
#ifndef PRS_CORE_PROFILE_INT_H
#define PRS_CORE_PROFILE_INT_H

#include "perseus/profile.h"

/* The name of a profile not read from a file. */
#define PRS__PROFILE_MEMORY_NAME "<memory>"

/* An empty profile named name (copied), or NULL when out of memory. */
prs_profile *prs__profile_alloc(const char *name);
/* Append a row whose values are already valid: checks only for a duplicate key. */
int prs__profile_append(prs_profile *p, const prs_profile_row *row, prs_error *err);
/* code with "NAME:LINE: problem" in err, or "NAME: problem" when line is 0; returns code. */
int prs__profile_fail(prs_error *err, int code, const char *name, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
