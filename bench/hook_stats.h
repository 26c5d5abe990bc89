/* Shared by the hook benchmarks (bench_hooks.c, bench_stream_hooks.c): the clock they time with,
 * the timed loop and the summary they print. Header-only: each benchmark stays one program. */
#ifndef PRS_BENCH_HOOK_STATS_H
#define PRS_BENCH_HOOK_STATS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "perseus/client.h"

enum { HOOK_PAIRS = 16 }; /* begin + end pairs per sample: one iteration of 8 microbatches */

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

/* 100 batches of warm-up, then `samples` samples: the mean begin + end over a batch of
 * HOOK_PAIRS (forward and backward alternating) and, on its own, the iteration_end after it.
 * settle (NULL: none) runs after each batch, untimed: a trainer's own synchronisation between
 * iterations. Prints median, p1 and p99 and the verdict against the target (median begin + end
 * < 2 us); returns 0 on PASS, 1 on MISS or when out of memory. */
static inline int hook_bench(prs_client *c, int samples, void (*settle)(void *), void *arg)
{
    double *pair = malloc(sizeof *pair * (size_t)samples);
    double *iter = malloc(sizeof *iter * (size_t)samples);
    if (!pair || !iter) {
        free(pair);
        free(iter);
        return 1;
    }
    for (int s = -100; s < samples; s++) {
        double t0 = hook_now_s();
        for (int i = 0; i < HOOK_PAIRS; i++) {
            prs_instr in = i % 2 ? PRS_BACKWARD : PRS_FORWARD;
            prs_client_begin(c, in, i / 2, 0);
            prs_client_end(c, in, i / 2, 0);
        }
        double t1 = hook_now_s();
        prs_client_iteration_end(c);
        double t2 = hook_now_s();
        if (s >= 0) {
            pair[s] = (t1 - t0) / HOOK_PAIRS;
            iter[s] = t2 - t1;
        }
        if (settle) settle(arg);
    }
    hook_report("begin + end", pair, samples);
    hook_report("iteration_end", iter, samples);
    double median = pair[samples / 2];
    printf("target: median begin + end < 2 us: %s (%.3f us)\n", median < 2e-6 ? "PASS" : "MISS",
           1e6 * median);
    free(pair);
    free(iter);
    return median < 2e-6 ? 0 : 1;
}

#endif
