/* Clock changes through perseus-gpud (docs/gpud.md): what a request costs the caller, and how
 * long it takes to be applied.
 *
 *   bench_gpud SPEC [SOCKET] [N]
 *
 * SPEC is the GPU (prs_gpu_open: "nvml:0", "nvml:GPU-..."); with SOCKET the node's daemon there
 * is used (DAEMON), else a private one is started (PROCESS). Two measurements, alternating
 * between the two highest clocks:
 *   host cost   N requests in a row, each timed alone (a non-blocking send; the daemon coalesces
 *               what piles up): median, p1, p99 of the time prs_clockctl_set takes;
 *   applied     N/10 requests each followed by prs_clockctl_sync: the daemon-side time from
 *               receiving the request to the driver's return (its acknowledgement says it), and
 *               the caller's time from the request to the acknowledgement.
 * Prints "target: median host cost < 2 us: PASS|MISS" and exits 1 on a miss or any failure.
 * The figures are a local socket and the driver call: on the test fake NVML the call is a
 * memory store, on a real GPU it is the driver's (hundreds of microseconds are common). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hook_stats.h"
#include "perseus/gpu.h"

#define TARGET_S 2e-6

static int bench_host(prs_clockctl *c, const int *clk, int n, double *v)
{
    for (int i = 0; i < n; i++) {
        double t0 = hook_now_s();
        int rc = prs_clockctl_set(c, clk[i % 2]);
        v[i] = hook_now_s() - t0;
        if (rc) return rc;
    }
    return prs_clockctl_sync(c, 10);
}

static int bench_applied(prs_clockctl *c, const int *clk, int n, double *daemon, double *trip)
{
    for (int i = 0; i < n; i++) {
        double t0 = hook_now_s();
        int rc = prs_clockctl_set(c, clk[(i + 1) % 2]);
        if (!rc) rc = prs_clockctl_sync(c, 10);
        trip[i] = hook_now_s() - t0;
        daemon[i] = 1e-9 * (double)prs_clockctl_apply_ns(c);
        if (rc) return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: bench_gpud SPEC [SOCKET] [N]\n");
        return 2;
    }
    const char *sock = argc > 2 && *argv[2] ? argv[2] : NULL;
    int n = argc > 3 ? atoi(argv[3]) : 20000;
    if (n < 100 || n > 10000000) {
        fprintf(stderr, "bench_gpud: N must be 100..10000000\n");
        return 2;
    }
    prs_error e;
    prs_gpu *g;
    if (prs_gpu_open(argv[1], &g, &e)) {
        fprintf(stderr, "bench_gpud: %s\n", e.msg);
        return 1;
    }
    int clk[2], count = 0;
    if (prs_gpu_clocks(g, clk, 2, &count) || count < 2) {
        fprintf(stderr, "bench_gpud: the GPU lists fewer than 2 clocks\n");
        return 1;
    }
    prs_clockctl *c;
    if (prs_clockctl_open(g, sock ? PRS_CLOCKCTL_DAEMON : PRS_CLOCKCTL_PROCESS, sock, &c, &e)) {
        fprintf(stderr, "bench_gpud: %s\n", e.msg);
        return 1;
    }
    double *v = malloc(sizeof *v * (size_t)n * 3);
    if (!v) return 1;
    int rc = bench_host(c, clk, n, v);
    if (!rc) rc = bench_applied(c, clk, n / 10, v + n, v + 2 * n);
    if (rc) {
        fprintf(stderr, "bench_gpud: %s\n", prs_gpu_errmsg(g));
    } else {
        printf("perseus-gpud (%s), GPU %s, clocks %d/%d MHz\n", sock ? "node daemon" : "private",
               prs_gpu_name(g), clk[0], clk[1]);
        hook_report("host cost per request", v, n);
        hook_report("applied (daemon side)", v + n, n / 10);
        hook_report("request to ack", v + 2 * n, n / 10);
        printf("clock failures %ld\n", prs_clockctl_failures(c));
        qsort(v, (size_t)n, sizeof *v, hook_cmp_double);
        int pass = v[n / 2] < TARGET_S;
        printf("target: median host cost < 2 us: %s\n", pass ? "PASS" : "MISS");
        if (!pass) rc = 1;
    }
    free(v);
    prs_clockctl_free(c);
    prs_gpu_close(g);
    return rc ? 1 : 0;
}
