/* The client's measure-only mode (perseus/client.h, opts.measure_only): no server, no clock
 * controller. On the sim GPU (exact counters, measured at the hooks) it must report every kind's
 * power as the GPU drew it, the blocked power, the clock the GPU ran at, and change no clock;
 * options that need a server, an out-of-range chunk and the call on a server-driven client are
 * refused. On a device stream of the fake CUDA driver and NVML (a counter refreshed every 10 ms)
 * it must count every computation past the warm-up, tag it with the GPU's clock, fit a memset at
 * 0.8 times a kernel's power (the fake's ratio) and change no clock. (tests/cli/client_gpu_check.sh
 * runs the same path from Python, at the H100's 100 ms refresh.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_int.h"
#include "fake_cuda.h"
#include "fake_dir.h"
#include "perseus/client.h"
#include "perseus/gpu.h"
#include "skips.h"

#define REL_TOL 1e-9 /* the sim's counters are exact: only rounding separates the figures */

typedef struct truth {
    double time_s[4], energy_j[4]; /* per kind (chunk * 2 + instr) */
    double idle_s, idle_j;
} truth;

static const prs_gpu_work work[4] = {{0.010, 0.9}, {0.020, 0.8}, {0.006, 0.5}, {0.012, 0.3}};

/* One computation of kind k under the hooks; the truth read off the counters around it. */
static void computation(prs_client *c, prs_gpu *g, int k, int mb, truth *t)
{
    assert_int_equal(prs_client_begin(c, (prs_instr)(k % 2), mb, k / 2), 0);
    double t0 = prs_gpu_now_s(g), e0 = prs_gpu_read_energy_j(g);
    assert_int_equal(prs_gpu_sim_run(g, &work[k], NULL), 0);
    t->time_s[k] += prs_gpu_now_s(g) - t0;
    t->energy_j[k] += prs_gpu_read_energy_j(g) - e0;
    assert_int_equal(prs_client_end(c, (prs_instr)(k % 2), mb, k / 2), 0);
}

static void idle(prs_gpu *g, double s, truth *t)
{
    double t0 = prs_gpu_now_s(g), e0 = prs_gpu_read_energy_j(g);
    assert_int_equal(prs_gpu_sim_idle(g, s), 0);
    t->idle_s += prs_gpu_now_s(g) - t0;
    t->idle_j += prs_gpu_read_energy_j(g) - e0;
}

static void test_sim_exact(void **state)
{
    (void)state;
    prs_gpu *g;
    prs_error err;
    assert_int_equal(prs_gpu_open("sim:a100", &g, &err), 0);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1;
    o.gpu = g;
    o.warmup_iterations = 2;
    prs_client *c;
    assert_int_equal(prs_client_new(&o, &c, &err), 0);
    truth t = {0}, warm = {0};
    for (int it = 0; it < 10; it++) {
        truth *to = it < o.warmup_iterations ? &warm : &t;
        /* kinds in an order no schedule has: measure-only checks none */
        for (int mb = 0; mb < 3; mb++) {
            computation(c, g, (it + mb) % 4, mb, to);
            idle(g, 0.004 * (mb + 1), to);
            computation(c, g, (it + mb + 2) % 4, mb, to);
        }
        assert_int_equal(prs_client_iteration_end(c), 0);
    }
    prs_client_kind k[8], blocked;
    int n = -1, mhz = 0;
    assert_int_equal(prs_client_measured(c, k, 8, &n, &blocked), 0);
    assert_int_equal(n, 4);
    assert_int_equal(prs_gpu_sm_clock_now(g, &mhz), 0);
    for (int i = 0; i < 4; i++) {
        int kind = k[i].chunk * 2 + k[i].instr;
        assert_int_equal(kind, i); /* in (chunk, instr) order */
        assert_int_equal(k[i].windows, 12);
        assert_int_equal(k[i].clock_min_mhz, mhz);
        assert_int_equal(k[i].clock_max_mhz, mhz);
        assert_true(fabs(k[i].time_s / t.time_s[i] - 1) < REL_TOL);
        double p = t.energy_j[i] / t.time_s[i];
        assert_true(fabs(k[i].power_w / p - 1) < REL_TOL);
    }
    assert_int_equal(blocked.chunk, -1);
    assert_true(fabs(blocked.power_w / (t.idle_j / t.idle_s) - 1) < 1e-6);
    prs_client_stats st;
    prs_client_get_stats(c, &st);
    assert_int_equal(st.iterations, 10);
    assert_int_equal(st.posted, 8); /* past the warm-up */
    assert_string_equal(st.phase, "profiling");
    prs_client_free(c);
    int locked = -1;
    assert_int_equal(prs_gpu_sim_clock(g, &locked), 0);
    assert_int_equal(locked, 0);
    assert_int_equal(prs_gpu_sim_clock_changes(g), 0);
    prs_gpu_close(g);
}

static void test_refused(void **state)
{
    (void)state;
    prs_gpu *g;
    prs_error err;
    assert_int_equal(prs_gpu_open("sim:a100", &g, &err), 0);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1;
    o.gpu = g;
    o.server_url = "http://127.0.0.1:1";
    prs_client *c = (prs_client *)&o;
    assert_int_equal(prs_client_new(&o, &c, &err), PRS_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err.msg, "measure_only runs without a server"));
    o.server_url = NULL;
    o.job_spec_json = "{}";
    assert_int_equal(prs_client_new(&o, &c, &err), PRS_EINVAL);
    o.job_spec_json = NULL;
    assert_int_equal(prs_client_new(&o, &c, &err), 0);
    assert_int_equal(prs_client_begin(c, PRS_FORWARD, 0, PRS_CLIENT_MAX_CHUNKS), PRS_EINVAL);
    assert_int_equal(prs_client_begin(c, PRS_FORWARD, 0, -1), PRS_EINVAL);
    int n = 0;
    assert_int_equal(prs_client_measured(c, NULL, 0, &n, NULL), 0);
    assert_int_equal(n, 0);
    prs_client_free(c);

    /* A server-driven client has nothing of the kind. */
    prs_client_opts_init(&o);
    o.gpu = g;
    o.server_url = "http://127.0.0.1:1";
    o.job_id = "j";
    o.token = "t";
    assert_int_equal(prs_client_new(&o, &c, &err), 0);
    assert_int_equal(prs_client_measured(c, NULL, 0, &n, NULL), PRS_EINVAL);
    prs_client_free(c);
    assert_int_equal(prs_client_abi_size(PRS_ABI_CLIENT_KIND), sizeof(prs_client_kind));
    prs_gpu_close(g);
}

#define STREAM_ITERS 120

typedef CUresult (*memset_fn)(uint64_t p, unsigned v, size_t n, CUstream s);
typedef CUresult (*alloc_fn)(uint64_t *p, size_t bytes);

/* On stream cs: 3 computations of random kind (a kernel of 2-6 ms: forward of chunk 0, or
 * memsets of 2-6 ms: forward of chunk 1), some after a gap, under the hooks. */
static void stream_iteration(prs_client *c, const fakecu_api *cu, memset_fn ms, uint64_t buf,
                             CUstream cs, unsigned *rng)
{
    for (int k = 0; k < 3; k++) {
        *rng = *rng * 1103515245u + 12345u;
        int kind = (int)(*rng >> 16) % 2, n = 1 + (int)(*rng >> 20) % 3;
        if ((*rng >> 24) % 2) {
            cu->cuStreamSynchronize(cs);
            sleep_s(0.002);
        }
        assert_int_equal(prs_client_begin(c, PRS_FORWARD, k, kind), 0);
        for (int i = 0; i < n; i++)
            if (kind == 0)
                assert_int_equal(cu->launch_work(cs, 0.002, 0.7, 0), CUDA_SUCCESS);
            else /* 2 ms at the fake's 2.5 TB/s */
                assert_int_equal(ms(buf, 0, (size_t)(0.002 * 2.5e12 / 4), cs), CUDA_SUCCESS);
        assert_int_equal(prs_client_end(c, PRS_FORWARD, k, kind), 0);
    }
    assert_int_equal(prs_client_iteration_end(c), 0);
}

static void test_stream(void **state)
{
    (void)state;
    fakecu_api cu;
    const char *cu_path = getenv("PRS_FAKE_CUDA"), *nvml_path = getenv("PRS_FAKE_NVML");
    if (!cu_path || !*cu_path || !nvml_path || !*nvml_path || fakecu_load(&cu, cu_path)) {
        prs_skip_case("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    memset_fn ms = (memset_fn)dlsym(cu.lib, "cuMemsetD32Async");
    alloc_fn alloc = (alloc_fn)dlsym(cu.lib, "cuMemAlloc_v2");
    assert_true(ms && alloc);
    char dir[256], state_file[300];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "measure-only"), 0);
    snprintf(state_file, sizeof state_file, "%s/clocks", dir);
    setenv("PRS_NVML_LIBRARY", nvml_path, 1);
    setenv("PRS_FAKE_NVML_REFRESH_MS", "10", 1);
    setenv("PRS_FAKE_NVML_STATE", state_file, 1);
    setenv("PRS_FAKE_GPU_COUNT", "1", 1);
    CUcontext ctx;
    CUstream cs;
    uint64_t buf = 0;
    assert_int_equal(cu.cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&cs, 0), CUDA_SUCCESS);
    assert_int_equal(alloc(&buf, (size_t)(0.002 * 2.5e12)), CUDA_SUCCESS);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1;
    o.use_stream = 1;
    o.stream = (uintptr_t)cs;
    o.cuda_library = cu_path;
    o.warmup_iterations = 2;
    prs_client *c;
    prs_error err;
    if (prs_client_new(&o, &c, &err)) fail_msg("prs_client_new: %s", err.msg);
    unsigned rng = 7;
    for (int it = 0; it < STREAM_ITERS; it++)
        stream_iteration(c, &cu, ms, buf, cs, &rng);
    cu.cuStreamSynchronize(cs);
    sleep_s(0.05); /* readings past the end */
    prs_client_kind k[4], blocked;
    int n = 0, mhz = 0;
    assert_int_equal(prs_client_measured(c, k, 4, &n, &blocked), 0);
    print_message("kernel %.1f W (se %.2f), memset %.1f W (se %.2f), blocked %.1f W: %s\n",
                  k[0].power_w, k[0].power_se_w, k[1].power_w, k[1].power_se_w, blocked.power_w,
                  prs_client_errmsg(c));
    assert_int_equal(n, 2);
    assert_int_equal(k[0].windows + k[1].windows, 3 * (STREAM_ITERS - o.warmup_iterations));
    assert_int_equal(prs_gpu_sm_clock_now(c->gpu, &mhz), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(k[i].chunk, i);
        assert_int_equal(k[i].clock_min_mhz, mhz);
        assert_int_equal(k[i].clock_max_mhz, mhz);
        assert_true(k[i].power_se_w < 0.05 * k[i].power_w);
    }
    double ratio = k[1].power_w / k[0].power_w;
    assert_true(ratio > 0.75 && ratio < 0.85); /* 0.8; swapped kinds: 1.25 */
    assert_true(blocked.power_w > 0 && blocked.power_w < 0.5 * k[1].power_w);
    prs_client_free(c);
    assert_int_equal(access(state_file, F_OK), -1); /* no clock was ever set */
    assert_int_equal(cu.cuStreamDestroy(cs), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    unsetenv("PRS_FAKE_NVML_STATE");
    fake_dir_end(dir, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_exact),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_stream),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
