/* Error codes and messages (include/perseus/error.h): part of the base library (perseus_base),
 * which every other library links, so none needs another only for its error helpers. */
#include <stdarg.h>
#include <stdio.h>

#include "perseus/error.h"

const char *prs_strerror(int code)
{
    switch (code) {
    case PRS_OK:
        return "success";
    case PRS_EINVAL:
        return "invalid argument";
    case PRS_ENOMEM:
        return "out of memory";
    case PRS_EIO:
        return "input/output error";
    case PRS_EPARSE:
        return "malformed input";
    case PRS_EFIT:
        return "cost model fit failed";
    case PRS_EINFEASIBLE:
        return "flow problem infeasible";
    case PRS_ERANGE:
        return "out of range";
    case PRS_ECANCELED:
        return "canceled";
    case PRS_EGPU:
        return "GPU call failed";
    case PRS_ENOLIB:
        return "GPU driver library missing";
    case PRS_ESERVER:
        return "server unreachable or refused the request";
    case PRS_EORDER:
        return "computation out of the schedule's order";
    default:
        return "unknown error";
    }
}

int prs_error_set(prs_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}
