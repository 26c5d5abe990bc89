/* One log line in logfmt, the format the daemons (perseusd, perseus-gpud) write: a UTC timestamp
 * with milliseconds, the level, then the caller's "key=value ..." text, on one line (newlines in
 * the text become spaces), written with one write(2) so concurrent lines do not interleave. */
#ifndef PERSEUS_LOGFMT_H
#define PERSEUS_LOGFMT_H

#include "perseus/export.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "ts=2026-11-23T17:45:59.305Z level=LEVEL " followed by fmt/ap, to fd; at most 1 KiB a line. */
PRS_API void prs_logfmt_write(int fd, const char *level, const char *fmt, va_list ap);

#ifdef __cplusplus
}
#endif
#endif
