/* A whole input file in memory, read to a bound (readfile.c): internal to the library, for the
 * readers whose input has a size limit (stage and inference profiles). */
#ifndef PRS_BASE_READFILE_H
#define PRS_BASE_READFILE_H

#include <stddef.h>

#include "perseus/error.h"

/* The file at path into *text (malloc'd, the caller frees it; not NUL-terminated) and *len. A
 * file over max bytes is refused after reading max + 1 of them, never more ("PATH: larger than
 * MAX bytes (LIMIT)", PRS_EPARSE, LIMIT naming whose limit it is); PRS_EIO when it cannot be
 * opened or read, PRS_ENOMEM; the message names path. *text is NULL on failure. */
int prs__read_bounded(const char *path, size_t max, const char *limit, char **text, size_t *len,
                      prs_error *err);

#endif
