/* Shared by the hook benchmarks (bench_hooks.c, bench_stream_hooks.c): the clock they time with
 * and the summary line they print. Header-only: each benchmark stays one program. */
#ifndef PRS_BENCH_HOOK_STATS_H
#define PRS_BENCH_HOOK_STATS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double hook_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int hook_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v and prints its median, p1 and p99 in ns. */
static inline void hook_report(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, hook_cmp_double);
    printf("%-22s median %7.1f ns   p1 %7.1f ns   p99 %7.1f ns   (%d samples)\n", what,
           1e9 * v[n / 2], 1e9 * v[n / 100], 1e9 * v[n - 1 - n / 100], n);
}

#endif
