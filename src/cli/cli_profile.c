/* Loading a stage profile for a command that plans from it: the file, its stages against the
 * pipeline, and a look at its units. The format says seconds and joules; a profile written in
 * milliseconds parses just as well and plans into hundreds of thousands of plans (every time is
 * a thousand times too long), so figures no GPU computation has are refused unless the user
 * says they are meant (--force-units). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

/* Computations longer than this (median over the rows) are taken for milliseconds: one
 * microbatch's forward or backward takes milliseconds to about a second. */
#define UNITS_MAX_MEDIAN_TIME_S 10.0
/* A computation's energy over its time is a GPU's power, or the power of the GPUs of one stage:
 * tens to hundreds of watts a GPU, never below 1 W, and not 100 kW (over a hundred GPUs). */
#define UNITS_MIN_MEDIAN_POWER_W 1.0
#define UNITS_MAX_MEDIAN_POWER_W 100000.0

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median time and median power over the rows; -1 when out of memory. */
static int medians(const prs_profile *p, double *time_s, double *power_w)
{
    size_t n = prs_profile_nrows(p);
    const prs_profile_row *rows = prs_profile_rows(p);
    double *t = malloc(n * sizeof *t), *w = malloc(n * sizeof *w);
    if (!t || !w) {
        free(t);
        free(w);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        t[i] = rows[i].time_s;
        w[i] = rows[i].time_s > 0 ? rows[i].energy_j / rows[i].time_s : 0;
    }
    qsort(t, n, sizeof *t, cmp_double);
    qsort(w, n, sizeof *w, cmp_double);
    *time_s = t[n / 2];
    *power_w = w[n / 2];
    free(t);
    free(w);
    return 0;
}

static int check_units(const char *cmd, const char *path, const prs_profile *p)
{
    double t, w;
    if (prs_profile_nrows(p) == 0) return 0;
    if (medians(p, &t, &w)) {
        fprintf(stderr, "perseus %s: out of memory\n", cmd);
        return 2;
    }
    if (t > UNITS_MAX_MEDIAN_TIME_S) {
        fprintf(stderr,
                "perseus %s: %s: times look like milliseconds, not seconds (median computation "
                "%g s; one microbatch's forward or backward takes milliseconds to about a "
                "second): write the profile in seconds and joules, or pass --force-units\n",
                cmd, path, t);
        return 2;
    }
    if (w < UNITS_MIN_MEDIAN_POWER_W || w > UNITS_MAX_MEDIAN_POWER_W) {
        fprintf(stderr,
                "perseus %s: %s: energy over time gives a median power of %g W, no GPU's (tens "
                "to hundreds of watts a GPU): write the profile in seconds and joules, or pass "
                "--force-units\n",
                cmd, path, w);
        return 2;
    }
    return 0;
}

int prs_cli_profile_load(const char *cmd, const char *path, const prs_cli_pipeline *p,
                         const prs_pipeline *pipe, prs_profile **out)
{
    prs_error err = {0, ""};
    *out = NULL;
    prs_profile *prof = NULL;
    if (prs_profile_load(path, &prof, &err) ||
        prs_profile_check_stages(prof, prs_pipeline_chunks(pipe), &err)) {
        fprintf(stderr, "perseus %s: %s\n", cmd, err.msg);
        prs_profile_free(prof);
        return 2;
    }
    if (!(p->given & PRS_CLI_BIT(PRS_CLI_FORCE_UNITS)) && check_units(cmd, path, prof)) {
        prs_profile_free(prof);
        return 2;
    }
    *out = prof;
    return 0;
}
