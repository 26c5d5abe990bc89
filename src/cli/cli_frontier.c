/* A planned frontier the CLI can use (cli.h): at least one plan, at a positive iteration time.
 * A unit time coarser than the computations rounds every time to 0 units, which leaves nothing
 * to plan; prs_plan_check tells the user why and which option to change. (One plan is a
 * frontier: when no computation can be sped up, the slowest plan is also the fastest.) */
#include <math.h>
#include <stdio.h>

#include "cli.h"

/* The shortest and longest measured computation times of the profile. */
static void time_range(const prs_profile *profile, double *lo, double *hi)
{
    const prs_profile_row *rows = prs_profile_rows(profile);
    *lo = INFINITY;
    *hi = 0;
    for (size_t i = 0; i < prs_profile_nrows(profile); i++) {
        if (rows[i].time_s < *lo) *lo = rows[i].time_s;
        if (rows[i].time_s > *hi) *hi = rows[i].time_s;
    }
}

int prs_cli_frontier_usable(const char *cmd, const prs_profile *profile, const prs_frontier *f)
{
    size_t n = prs_frontier_size(f);
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    prs_error err = {0, ""};
    /* the fastest plan at 0 units says it; prs_plan_check (which opens the problem again) only
     * words it */
    if (n > 0 && prs_frontier_point_at(f, n - 1)->time_units == 0 &&
        prs_plan_check(profile, pipe, "--unit-time", &err)) {
        fprintf(stderr, "perseus %s: error: %s\n", cmd, err.msg);
        return 1;
    }
    double lo, hi;
    time_range(profile, &lo, &hi);
    if (n == 0) {
        fprintf(stderr,
                "perseus %s: error: the frontier is empty: the planner found no plan for "
                "computations of %.3g s .. %.3g s at --unit-time %g s; check the profile's "
                "stages and clocks, or try --unit-time %.2g\n",
                cmd, lo, hi, pipe->unit_time_s, lo / 20);
        return 1;
    }
    return 0;
}
