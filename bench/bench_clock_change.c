/* bench_clock_change: device-side cost of a clock change on the device-stream path
 * (perseus/client.h with use_stream): how long the stream is held, per change, by the host
 * function that requests the clock.
 *
 * The CUDA driver is the tests' fake libcuda.so.1 and NVML the fake libnvidia-ml.so.1 (paths in
 * $PRS_FAKE_CUDA and $PRS_FAKE_NVML, or as arguments); clock changes go through a private
 * perseus-gpud (PRS_CLOCKCTL_PROCESS), as a trainer's do. An iteration is 16 begin + end pairs
 * with no work between them, bracketed by two events of our own: its device time is the events',
 * and the host functions' the stream waited for. Three kinds of iterations, interleaved:
 *   - "same clock": the schedule keeps one clock, no change is requested;
 *   - "change": the clock alternates at every computation (16 changes), as the client requests
 *     them (the host function sends and goes on);
 *   - "waiting change": the same 16 changes by a host function of ours that waits for
 *     perseus-gpud's answer (prs_clockctl_sync), as the client did before, for comparison.
 * The cost per change is (iteration device time - the same clock's) / 16, of the medians and of
 * the means (the mean carries the slow tail a stream pays for too).
 *
 * The fake NVML applies a lock with a memory store; on a real GPU the driver call takes hundreds
 * of microseconds, which the waiting change adds to the stream and the change does not.
 *
 * usage: bench_clock_change [SAMPLES [FAKE_CUDA FAKE_NVML]]   (default 2000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "cuda_driver.h"
#include "hook_stats.h"

enum { MODE_SAME, MODE_CHANGE, MODE_WAIT, N_MODES };
static const char *const mode_name[N_MODES] = {"same clock", "change", "waiting change"};

typedef struct drv {
    int (*event_create)(void **, unsigned);
    int (*event_record)(void *, void *);
    int (*event_sync)(void *);
    int (*elapsed)(float *, void *, void *);
    int (*stream_create)(void **, unsigned);
} drv;

static int load_drv(void *lib, drv *d)
{
    void *p[5] = {dlsym(lib, "cuEventCreate"), dlsym(lib, "cuEventRecord"),
                  dlsym(lib, "cuEventSynchronize"), dlsym(lib, "cuEventElapsedTime"),
                  dlsym(lib, "cuStreamCreate")};
    for (int i = 0; i < 5; i++)
        if (!p[i]) return -1;
    memcpy(&d->event_create, &p[0], sizeof p[0]);
    memcpy(&d->event_record, &p[1], sizeof p[1]);
    memcpy(&d->event_sync, &p[2], sizeof p[2]);
    memcpy(&d->elapsed, &p[3], sizeof p[3]);
    memcpy(&d->stream_create, &p[4], sizeof p[4]);
    return 0;
}

/* Publish a running schedule: one clock (alternate 0) or two alternating at every computation. */
static void set_schedule(prs_client *c, int lo, int hi, int alternate)
{
    prs__client_schedule s;
    memset(&s, 0, sizeof s);
    snprintf(s.phase, sizeof s.phase, "running");
    s.plan_id = alternate ? 2 : 1;
    s.from_iteration = -1;
    s.n = HOOK_PAIRS;
    s.clocks = malloc(sizeof(int) * HOOK_PAIRS);
    for (int i = 0; i < HOOK_PAIRS; i++)
        s.clocks[i] = alternate && i % 2 ? lo : hi;
    pthread_mutex_lock(&c->mu);
    prs__client_schedule_free(&c->latest);
    c->latest = s;
    atomic_fetch_add(&c->latest_version, 1);
    pthread_mutex_unlock(&c->mu);
}

/* The change as the client made it before: request, then wait for the answer. */
typedef struct waiting {
    prs_clockctl *ctl;
    int mhz;
    int failed;
} waiting;

static void waiting_change(void *user)
{
    waiting *w = user;
    if (prs_clockctl_set(w->ctl, w->mhz) || prs_clockctl_sync(w->ctl, 0.5)) w->failed++;
}

/* One iteration of the mode; its device time in seconds (negative on failure). */
static double iteration(prs_client *c, const drv *d, void *cs, void *ev[2], waiting w[HOOK_PAIRS],
                        int mode, int lo, int hi)
{
    d->event_record(ev[0], cs);
    for (int i = 0; i < HOOK_PAIRS; i++) {
        prs_instr in = i % 2 ? PRS_BACKWARD : PRS_FORWARD;
        if (mode == MODE_WAIT) {
            w[i] = (waiting){c->ctl, i % 2 ? lo : hi, 0};
            if (prs_stream_host_fn(c->dev->stream, waiting_change, &w[i])) return -1;
        }
        if (prs_client_begin(c, in, i / 2, 0) || prs_client_end(c, in, i / 2, 0)) return -1;
    }
    d->event_record(ev[1], cs);
    if (prs_client_iteration_end(c)) return -1;
    float ms = 0;
    if (d->event_sync(ev[1]) || d->elapsed(&ms, ev[0], ev[1])) return -1;
    for (int i = 0; mode == MODE_WAIT && i < HOOK_PAIRS; i++)
        if (w[i].failed) return -1;
    return 1e-3 * ms;
}

static prs_client *open_client(const char *cuda, void *cs)
{
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = "http://127.0.0.1:9"; /* discard port: nobody answers */
    o.job_id = "benchjob";
    o.token = "benchtoken";
    o.gpu_spec = "nvml:0";
    o.controller = PRS_CLOCKCTL_PROCESS;
    o.use_stream = 1;
    o.stream = (uintptr_t)cs;
    o.cuda_library = cuda;
    o.poll_interval_s = 3600;
    o.flush_timeout_s = 0;
    o.warmup_iterations = 0;
    prs_client *c;
    prs_error err;
    if (prs_client_new(&o, &c, &err)) {
        fprintf(stderr, "bench_clock_change: %s\n", err.msg);
        return NULL;
    }
    return c;
}

/* Interleaved samples of the three modes; prints them and the cost per change. */
static int run(prs_client *c, const drv *d, void *cs, int samples)
{
    int clocks[256], n = 0;
    if (prs_gpu_clocks(c->gpu, clocks, 256, &n) || n < 2) return 1;
    int hi = clocks[0] > clocks[n - 1] ? clocks[0] : clocks[n - 1], lo = clocks[n / 2];
    void *ev[2];
    if (d->event_create(&ev[0], 0) || d->event_create(&ev[1], 0)) return 1;
    double *t[N_MODES];
    waiting w[HOOK_PAIRS];
    int rc = 0;
    for (int m = 0; m < N_MODES; m++)
        if (!(t[m] = malloc(sizeof(double) * (size_t)samples))) rc = 1;
    for (int s = -20; s < samples && rc == 0; s++)
        for (int m = 0; m < N_MODES && rc == 0; m++) {
            set_schedule(c, lo, hi, m == MODE_CHANGE);
            double v = iteration(c, d, cs, ev, w, m, lo, hi);
            if (v < 0) rc = 1;
            if (s >= 0) t[m][s] = v;
        }
    if (rc == 0) {
        double mean[N_MODES] = {0};
        for (int m = 0; m < N_MODES; m++) {
            for (int i = 0; i < samples; i++)
                mean[m] += t[m][i] / samples;
            hook_report(mode_name[m], t[m], samples); /* sorts */
        }
        printf("device time per clock change (%d MHz <-> %d MHz, over the same clock):\n", lo, hi);
        for (int m = MODE_CHANGE; m < N_MODES; m++)
            printf("  %-15s median %8.2f us   mean %8.2f us\n", mode_name[m],
                   1e6 * (t[m][samples / 2] - t[MODE_SAME][samples / 2]) / HOOK_PAIRS,
                   1e6 * (mean[m] - mean[MODE_SAME]) / HOOK_PAIRS);
    }
    for (int m = 0; m < N_MODES; m++)
        free(t[m]);
    return rc;
}

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 2000;
    const char *cuda = argc > 3 ? argv[2] : getenv("PRS_FAKE_CUDA");
    const char *nvml = argc > 3 ? argv[3] : getenv("PRS_FAKE_NVML");
    if (samples < 100) samples = 100;
    if (!cuda || !nvml) {
        fprintf(stderr, "bench_clock_change: give the fake libcuda.so.1 and libnvidia-ml.so.1 "
                        "(arguments or $PRS_FAKE_CUDA, $PRS_FAKE_NVML)\n");
        return 2;
    }
    setenv("PRS_NVML_LIBRARY", nvml, 1);
    void *lib = bench_cuda_context(cuda);
    drv d;
    void *cs = NULL;
    if (!lib || load_drv(lib, &d) || d.stream_create(&cs, 0)) {
        fprintf(stderr, "bench_clock_change: no CUDA context from %s\n", cuda);
        return 1;
    }
    prs_client *c = open_client(cuda, cs);
    if (!c) return 1;
    printf("bench_clock_change: fake CUDA stream, private perseus-gpud, %d pairs per iteration, "
           "%d iterations per mode\n",
           HOOK_PAIRS, samples);
    int rc = run(c, &d, cs, samples);
    prs_client_stats st;
    prs_client_get_stats(c, &st);
    printf("clock failures %ld\n", st.clock_failures);
    prs_client_free(c);
    if (rc) fprintf(stderr, "bench_clock_change: an iteration failed\n");
    return rc;
}
