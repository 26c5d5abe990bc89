/* The GPU backends' error convention (gpu_int.h): a failed call records its message on the handle
 * (prs_gpu_errmsg) and returns its PRS_E* code; and the one refusal message several of them give
 * (MIG). Its own file so that the backends (gpu.c, nvml.c, devsel.c, clockctl.c) share it without
 * depending on one another. */
#include <stdarg.h>
#include <stdio.h>

#include "gpu_int.h"

int prs__gpu_fail(prs_gpu *g, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* va_start above initialises ap: LLVM 14 reports this when one clang-tidy run analyses the
     * file twice (it is built into two targets) */
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized)
    vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

/* Locked clocks are a whole GPU's: MIG instances are refused, with what to do. */
int prs__gpu_mig_refusal(prs_error *err, const char *what)
{
    return prs_error_set(err, PRS_EINVAL,
                         "%.200s: MIG is not supported: a locked SM clock applies to the whole "
                         "physical GPU, shared by all its MIG instances, not to one instance; "
                         "give each rank a whole GPU (disable MIG mode: nvidia-smi -i GPU -mig 0, "
                         "then reset the GPU) or use the sim backend",
                         what);
}
