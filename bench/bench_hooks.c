/* bench_hooks: overhead of the client's training-thread hooks (perseus/client.h).
 *
 * One client on the sim GPU backend (reading its time and energy is a memory load, so what is
 * measured is the hooks themselves, not a driver call) with no device-sync callback. The server
 * URL points at a port nobody listens on and the poll interval is an hour, so the background
 * thread stays asleep and the schedule never arrives: the clock is never changed ("no GPU call").
 *
 * A sample is the mean cost of one begin + end pair over a batch of 16 pairs (one iteration of 8
 * microbatches), read with CLOCK_MONOTONIC around the batch; iteration_end runs between batches
 * and is sampled the same way on its own. Prints the median, 1st and 99th percentile over the
 * samples and a PASS/MISS verdict against the target (median begin + end < 2 us).
 *
 * usage: bench_hooks [SAMPLES]   (default 20000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hook_stats.h"
#include "perseus/client.h"

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 20000;
    if (samples < 100) samples = 100;
    prs_gpu *gpu;
    prs_error err;
    if (prs_gpu_open("sim:a100", &gpu, &err)) {
        fprintf(stderr, "bench_hooks: %s\n", err.msg);
        return 1;
    }
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = "http://127.0.0.1:9"; /* discard port: nobody answers */
    o.job_id = "benchjob";
    o.token = "benchtoken";
    o.gpu = gpu;
    o.poll_interval_s = 3600;
    o.flush_timeout_s = 0;
    prs_client *c;
    if (prs_client_new(&o, &c, &err)) {
        fprintf(stderr, "bench_hooks: %s\n", err.msg);
        return 1;
    }
    printf("bench_hooks: sim backend, no device sync, no clock change, %d pairs per sample\n",
           HOOK_PAIRS);
    int rc = hook_bench(c, samples, NULL, NULL);
    prs_client_free(c);
    prs_gpu_close(gpu);
    return rc;
}
