/* Perseus error codes and the error-detail buffer shared by every library call.
 *
 * Every fallible call returns 0 on success or a negative PRS_E* code. When the caller passes a
 * non-NULL prs_error, a one-line human-readable message (naming the file, line or field at
 * fault where there is one) is written into it. Library code never prints and never exits. */
#ifndef PERSEUS_ERROR_H
#define PERSEUS_ERROR_H

#include "perseus/export.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PRS_OK = 0,
    PRS_EINVAL = -1,      /* bad argument or option value */
    PRS_ENOMEM = -2,      /* allocation failed */
    PRS_EIO = -3,         /* file could not be read or written */
    PRS_EPARSE = -4,      /* malformed input (CSV, JSON, plan store) */
    PRS_EFIT = -5,        /* cost model could not be fitted */
    PRS_EINFEASIBLE = -6, /* flow problem infeasible: planner stopped */
    PRS_ERANGE = -7,      /* index or time outside what exists */
    PRS_ECANCELED = -8,   /* the caller stopped the work (a progress callback said so) */
    PRS_EGPU = -20,       /* the GPU or its driver refused or failed a call */
    PRS_ENOLIB = -21,     /* the driver library (or one of its symbols) is missing */
    PRS_ESERVER = -30,    /* the server refused a request or could not be reached */
    PRS_EORDER = -31,     /* a hook out of the order the schedule expects */
};

#define PRS_ERRMSG_MAX 512

typedef struct prs_error {
    int code;
    char msg[PRS_ERRMSG_MAX];
} prs_error;

/* Static description of a code ("invalid argument", ...). Never NULL. */
PRS_API const char *prs_strerror(int code);

/* Record code and a printf-style message in err (if err is non-NULL); returns code. */
PRS_API int prs_error_set(prs_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
