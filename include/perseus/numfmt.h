/* Number formatting and parsing shared by every text format we write or read (implemented in the
 * core, src/core/numfmt.c). Public so that the emulator, the server and the command line format
 * numbers exactly as the core's CSVs do without reading a core-private header. */
#ifndef PERSEUS_NUMFMT_H
#define PERSEUS_NUMFMT_H

#include "perseus/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Shortest decimal text that reads back as exactly x, laid out as Python's repr(float) does
 * ("3.456", "5736.0", "1e-07", "inf", "nan"), so our CSVs compare textually with the
 * reference's. buf should hold at least PRS_NUMFMT_MAX bytes. Returns buf. */
#define PRS_NUMFMT_MAX 32
PRS_API char *prs_num_fmt_double(char *buf, size_t n, double x);

/* Strict parsers: the whole string must be a number (no trailing junk, no empty string);
 * 0 on success, -1 otherwise. parse_double accepts finite values only. */
PRS_API int prs_num_parse_double(const char *s, double *out);
PRS_API int prs_num_parse_long(const char *s, long *out);
PRS_API int prs_num_parse_int(const char *s, int *out);

/* A copy of the JSON text json with every real number in the shortest form that reads back as
 * the same double ("83.64", not the 17 digits "83.640000000000001" of a %.17g writer); strings,
 * integers and everything else unchanged. malloc'd (free it); NULL when out of memory. */
PRS_API char *prs_num_json_shortest(const char *json);

/* Python's float floor division a // b (fmod-based; differs from floor(a/b) in corner cases:
 * Python gives 9.0 for 1.0 // 0.1). docs/planner.md, 'Options'. */
PRS_API double prs_num_py_floordiv(double a, double b);

#ifdef __cplusplus
}
#endif
#endif
