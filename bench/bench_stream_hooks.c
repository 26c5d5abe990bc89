/* bench_stream_hooks: host cost of the client's hooks on the device-stream path (perseus/client.h
 * with use_stream), a clock change requested before every computation.
 *
 * The CUDA driver is the tests' fake libcuda.so.1 and NVML the fake libnvidia-ml.so.1 (paths in
 * $PRS_FAKE_CUDA and $PRS_FAKE_NVML, or as arguments): what is timed is our begin + end, i.e. one
 * host function enqueued for the clock change and two event records, plus the fake driver's
 * enqueue (a mutex and a queue slot; a real driver's cuEventRecord costs a few hundred ns more).
 * The schedule is set in the client as the server would send it for the running phase, with the
 * clock alternating between two values at every computation, so every begin requests a change.
 * No server answers (the background thread sleeps). After each sample, untimed, the bench waits
 * for the sample before it to have run on the stream, as a trainer synchronises once an iteration
 * (a loss read back, an optimizer step) while the GPU works one iteration behind: a host that ran
 * on unsynchronised would reach 53 pending host functions, where the driver itself holds
 * cuEventRecord (an H100's does, and the fake models it), and the figure would be the fake
 * stream's pace instead of our hooks' cost.
 *
 * A sample is the mean cost of one begin + end over a batch of 16 pairs (one iteration of 8
 * microbatches); iteration_end (which also resolves completed iterations) is sampled on its own.
 * Prints median, p1, p99 and a PASS/MISS verdict against the target (median < 2 us).
 *
 * usage: bench_stream_hooks [SAMPLES [FAKE_CUDA FAKE_NVML]]   (default 5000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_int.h"
#include "cuda_driver.h"
#include "hook_stats.h"

/* Publish a running schedule whose clock alternates at every computation. */
static void set_schedule(prs_client *c)
{
    prs__client_schedule s;
    memset(&s, 0, sizeof s);
    snprintf(s.phase, sizeof s.phase, "running");
    s.plan_id = 1;
    s.from_iteration = -1;
    s.n = HOOK_PAIRS;
    s.clocks = malloc(sizeof(int) * HOOK_PAIRS);
    for (int i = 0; i < HOOK_PAIRS; i++)
        s.clocks[i] = i % 2 ? 1395 : 1410;
    pthread_mutex_lock(&c->mu);
    prs__client_schedule_free(&c->latest);
    c->latest = s;
    atomic_fetch_add(&c->latest_version, 1);
    pthread_mutex_unlock(&c->mu);
}

/* The trainer's synchronisation: an event recorded after each sample, and a wait for the one
 * recorded after the sample before, so the stream holds at most two samples (32 host functions)
 * and its thread is kept busy with the previous sample while the next one is timed. */
typedef struct pacer {
    int (*create)(void **, unsigned);
    int (*record)(void *, void *);
    int (*sync)(void *);
    void *ev[2];
    long n;
} pacer;

static int pacer_init(pacer *p, void *lib)
{
    void *c = dlsym(lib, "cuEventCreate"), *r = dlsym(lib, "cuEventRecord");
    void *w = dlsym(lib, "cuEventSynchronize");
    if (!c || !r || !w) return -1;
    memcpy(&p->create, &c, sizeof c);
    memcpy(&p->record, &r, sizeof r);
    memcpy(&p->sync, &w, sizeof w);
    p->n = 0;
    return p->create(&p->ev[0], 0) || p->create(&p->ev[1], 0) ? -1 : 0;
}

static void pace(void *arg)
{
    pacer *p = arg;
    int failed = p->record(p->ev[p->n % 2], NULL) != 0;
    if (p->n > 0) failed |= p->sync(p->ev[(p->n + 1) % 2]) != 0;
    p->n++;
    if (failed) fprintf(stderr, "bench_stream_hooks: an event record or wait failed\n");
}

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 5000;
    const char *cuda = argc > 3 ? argv[2] : getenv("PRS_FAKE_CUDA");
    const char *nvml = argc > 3 ? argv[3] : getenv("PRS_FAKE_NVML");
    if (samples < 100) samples = 100;
    if (!cuda || !nvml) {
        fprintf(stderr, "bench_stream_hooks: give the fake libcuda.so.1 and libnvidia-ml.so.1 "
                        "(arguments or $PRS_FAKE_CUDA, $PRS_FAKE_NVML)\n");
        return 2;
    }
    setenv("PRS_NVML_LIBRARY", nvml, 1);
    void *lib = bench_cuda_context(cuda);
    pacer pc;
    if (!lib || pacer_init(&pc, lib)) {
        fprintf(stderr, "bench_stream_hooks: no CUDA context from %s\n", cuda);
        return 1;
    }
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = "http://127.0.0.1:9"; /* discard port: nobody answers */
    o.job_id = "benchjob";
    o.token = "benchtoken";
    o.gpu_spec = "nvml:0";
    o.controller = PRS_CLOCKCTL_INLINE;
    o.use_stream = 1;
    o.cuda_library = cuda;
    o.poll_interval_s = 3600;
    o.flush_timeout_s = 0;
    o.warmup_iterations = 0;
    prs_client *c;
    prs_error err;
    if (prs_client_new(&o, &c, &err)) {
        fprintf(stderr, "bench_stream_hooks: %s\n", err.msg);
        return 1;
    }
    set_schedule(c);
    printf("bench_stream_hooks: fake CUDA stream, a clock change before every computation, %d "
           "pairs per sample\n",
           HOOK_PAIRS);
    int rc = hook_bench(c, samples, pace, &pc);
    prs_client_stats st;
    prs_client_get_stats(c, &st);
    printf("clock failures %ld\n", st.clock_failures);
    prs_client_free(c);
    return rc;
}
