/* The GPU backends' error convention (gpu_int.h): a failed call records its message on the handle
 * (prs_gpu_errmsg) and returns its PRS_E* code. Its own file so that the backends (gpu.c, nvml.c,
 * clockctl.c) share it without depending on one another. */
#include <stdarg.h>
#include <stdio.h>

#include "gpu_int.h"

int gpuI_fail(prs_gpu *g, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
    va_end(ap);
    return code;
}
