/* The rank's pace on the device-stream path (src/client/resolve.c), which the server's straggler
 * detection compares across pipelines (docs/server.md): two pipelines of one stage each, on two
 * fake GPUs (fake libcuda and NVML), whose iterations end in a device-side all-reduce (a barrier
 * of the fake driver), so their iteration times are equal; one runs its computations 1.2x
 * slower. Each rank's pace must be its own computations' time, not the synchronised iteration
 * time: the paces' ratio is the slowdown (computed from the iteration time, as a defect once
 * did, it is 1 and no straggler could ever be seen). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_dir.h"
#include "perseus/client.h"
#include "skips.h"
#include "wait.h"

#define ITERS 16
#define SLOWDOWN 1.2
#define PACE_TOL 0.03 /* the fake's kernels last exactly the model's time: only the host's lag */

static fakecu_api cu;
static const char *cu_path, *nvml_path;

typedef struct pipeline {
    int device;
    double factor; /* its computations' times, relative to the other pipeline's */
    double pace_s; /* out: the client's last pace */
    long iterations;
    char err[256];
} pipeline;

/* Two forwards (4 ms) and two backwards (8 ms), then the all-reduce with the other pipeline. */
static int iteration(prs_client *c, CUstream cs, double factor)
{
    for (int k = 0; k < 4; k++) {
        prs_instr in = k < 2 ? PRS_FORWARD : PRS_BACKWARD;
        if (prs_client_begin(c, in, k % 2, 0)) return -1;
        if (cu.launch_work(cs, (in == PRS_FORWARD ? 0.004 : 0.008) * factor, 0.7, 0)) return -2;
        if (prs_client_end(c, in, k % 2, 0)) return -3;
    }
    if (cu.launch_barrier(cs, "allreduce", 2)) return -4;
    return prs_client_iteration_end(c);
}

/* Iterations resolved so far (prs_client_measured resolves what it can first). */
static long resolved(prs_client *c)
{
    prs_client_kind k[4], blocked;
    int n = 0;
    prs_client_stats st;
    (void)prs_client_measured(c, k, 4, &n, &blocked);
    prs_client_get_stats(c, &st);
    return st.iterations - st.measure_failures;
}

static void *pipeline_main(void *arg)
{
    pipeline *p = arg;
    CUcontext ctx;
    CUstream cs;
    if (cu.cuDevicePrimaryCtxRetain(&ctx, p->device) || cu.cuCtxSetCurrent(ctx) ||
        cu.cuStreamCreate(&cs, 0)) {
        snprintf(p->err, sizeof p->err, "no context or stream on device %d", p->device);
        return NULL;
    }
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1; /* no server: the pace is read from the client's stats */
    o.use_stream = 1;
    o.stream = (uintptr_t)cs;
    o.cuda_library = cu_path;
    prs_client *c;
    prs_error e;
    if (prs_client_new(&o, &c, &e)) {
        snprintf(p->err, sizeof p->err, "prs_client_new: %.200s", e.msg);
        return NULL;
    }
    for (int it = 0; it < ITERS && !p->err[0]; it++) {
        int rc = iteration(c, cs, p->factor);
        if (rc) snprintf(p->err, sizeof p->err, "iteration %d: %d", it, rc);
    }
    cu.cuStreamSynchronize(cs); /* every iteration's events complete; they are resolved once
                                   the energy readings passed their ends */
    PRS_WAIT_UNTIL(p->err[0] || resolved(c) >= ITERS, 30);
    prs_client_stats st;
    prs_client_get_stats(c, &st);
    p->pace_s = st.pace_s;
    p->iterations = st.iterations;
    prs_client_free(c);
    cu.cuStreamDestroy(cs);
    cu.cuCtxSetCurrent(NULL);
    cu.cuDevicePrimaryCtxRelease(p->device);
    return NULL;
}

static void test_straggler_pace(void **state)
{
    if (!cu_path || !nvml_path || fakecu_load(&cu, cu_path)) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "pace"), 0);
    setenv("PRS_NVML_LIBRARY", nvml_path, 1);
    setenv("PRS_FAKE_GPU_COUNT", "2", 1);
    setenv("PRS_FAKE_NVML_DEVICES", "2", 1);
    setenv("PRS_FAKE_NVML_REFRESH_MS", "10", 1);
    assert_int_equal(cu.cuInit(0), CUDA_SUCCESS);
    pipeline p[2] = {{.device = 0, .factor = 1.0}, {.device = 1, .factor = SLOWDOWN}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, pipeline_main, &p[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        if (p[i].err[0]) fail_msg("pipeline %d: %s", i, p[i].err);
    double ratio = p[1].pace_s / p[0].pace_s;
    print_message("paces: %.2f ms and %.2f ms (x%.3f), %ld and %ld iterations\n", 1e3 * p[0].pace_s,
                  1e3 * p[1].pace_s, ratio, p[0].iterations, p[1].iterations);
    assert_true(p[0].iterations >= ITERS && p[1].iterations >= ITERS);
    assert_true(p[0].pace_s > 0 && p[1].pace_s > 0);
    assert_true(fabs(ratio / SLOWDOWN - 1) < PACE_TOL);
    unsetenv("PRS_FAKE_NVML_DEVICES");
    unsetenv("PRS_FAKE_NVML_REFRESH_MS");
    fake_dir_end(dir, 2);
}

int main(void)
{
    cu_path = getenv("PRS_FAKE_CUDA");
    nvml_path = getenv("PRS_FAKE_NVML");
    if (cu_path && !*cu_path) cu_path = NULL;
    if (nvml_path && !*nvml_path) nvml_path = NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straggler_pace),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
