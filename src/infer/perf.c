/* Checks on an inference performance backend (perf.h): a table with every callback, and the
 * figures it answers finite and positive, so the emulator can trust them without checking
 * each one again. */
#include "perf.h"

#include <math.h>
#include <stddef.h>

int prs__infer_perf_check(const prs_infer_perf *p, prs_error *err)
{
    if (!p || !p->prefill || !p->decode || !p->idle_power || !p->capacity || !p->clocks || !p->tps)
        return prs_error_set(err, PRS_EINVAL, "inference performance backend incomplete");
    return PRS_OK;
}

int prs__infer_perf_figures_ok(double time_s, double energy_j)
{
    return isfinite(time_s) && isfinite(energy_j) && time_s > 0 && energy_j >= 0;
}
