/* Device streams (perseus/stream.h) on the fake libcuda.so.1 (tests/client/fake_cuda.c, path in
 * $PRS_FAKE_CUDA): clean errors without the library, a symbol or a context; event timing exact
 * while the host runs ahead; operations that never start before the host enqueued them; host
 * functions in stream order, holding the stream; the device's UUID as NVML names it; and a clock
 * change made by a host function in stream order, against one requested from the host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "perseus/gpu.h"
#include "fake_dir.h"
#include "perseus/stream.h"

static fakecu_api cu;
static const char *cu_path;

/* One test's devices: a fresh $PRS_FAKE_GPU_DIR, device dev's context current on this thread, a
 * CUDA stream made on it, and a prs_stream bound to it. */
typedef struct fixture {
    char dir[256];
    CUdevice dev;
    CUstream cs;
    prs_stream *s;
} fixture;

static void fx_begin(fixture *f, CUdevice dev)
{
    assert_int_equal(fake_dir_begin(f->dir, sizeof f->dir, "stream"), 0);
    f->dev = dev;
    CUcontext c;
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&c, dev), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(c), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&f->cs, 0), CUDA_SUCCESS);
    prs_error e;
    assert_int_equal(prs_stream_open_cuda((uintptr_t)f->cs, cu_path, &f->s, &e), 0);
}

static void fx_end(fixture *f)
{
    prs_stream_close(f->s);
    assert_int_equal(cu.cuStreamDestroy(f->cs), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(f->dev), CUDA_SUCCESS);
    fake_dir_end(f->dir, 8);
}

static double elapsed(prs_stream *s, prs_event *a, prs_event *b)
{
    double t = -1;
    assert_int_equal(prs_event_elapsed_s(s, a, b, &t), 0);
    return t;
}

static void test_errors(void **state)
{
    prs_stream *s = (prs_stream *)1;
    prs_error e;
    assert_int_equal(prs_stream_open_cuda(0, "/nonexistent/libcuda.so.1", &s, &e), PRS_ENOLIB);
    assert_null(s);
    assert_non_null(strstr(e.msg, "/nonexistent/libcuda.so.1"));
    assert_int_equal(prs_stream_open_cuda(0, "libm.so.6", &s, &e), PRS_ENOLIB);
    assert_non_null(strstr(e.msg, "cuInit"));
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    /* The library is there, but no context is current on this thread. */
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(prs_stream_open_cuda(0, cu_path, &s, &e), PRS_EGPU);
    assert_null(s);
    assert_non_null(strstr(e.msg, "initialise CUDA on this thread"));
    /* $PRS_CUDA_LIBRARY names the library when no path is given. */
    setenv("PRS_CUDA_LIBRARY", "/nonexistent/libcuda-env.so.1", 1);
    assert_int_equal(prs_stream_open_cuda(0, NULL, &s, &e), PRS_ENOLIB);
    assert_non_null(strstr(e.msg, "libcuda-env"));
    unsetenv("PRS_CUDA_LIBRARY");

    /* Driver errors carry the driver's error name. */
    fixture f;
    fx_begin(&f, 0);
    prs_event *a, *b;
    assert_int_equal(prs_event_new(f.s, &a), 0);
    assert_int_equal(prs_event_new(f.s, &b), 0);
    assert_int_equal(prs_event_query(f.s, a), 1); /* never recorded */
    double t;
    assert_int_equal(prs_event_elapsed_s(f.s, a, b, &t), PRS_EGPU);
    assert_non_null(strstr(prs_stream_errmsg(f.s), "CUDA_ERROR_INVALID_HANDLE"));
    fakecu_gate gate = FAKECU_GATE_INIT; /* nothing is reached until it opens */
    assert_int_equal(fakecu_gate_close(&cu, &gate, f.cs), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(f.cs, 0.030, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(prs_event_record(f.s, a), 0);
    assert_int_equal(prs_event_record(f.s, b), 0);
    assert_int_equal(prs_event_query(f.s, b), 0);
    assert_int_equal(prs_event_elapsed_s(f.s, a, b, &t), PRS_EGPU);
    assert_non_null(strstr(prs_stream_errmsg(f.s), "CUDA_ERROR_NOT_READY"));
    fakecu_gate_open(&gate);
    assert_int_equal(prs_event_wait(f.s, b), 0);
    assert_int_equal(prs_event_query(f.s, a), 1);
    assert_int_equal(prs_event_query(f.s, b), 1);
    assert_int_equal(prs_stream_host_fn(f.s, NULL, NULL), PRS_EINVAL);
    char buf[16];
    assert_int_equal(prs_stream_device_uuid(f.s, buf, sizeof buf), PRS_EINVAL);
    prs_event_free(f.s, a);
    prs_event_free(f.s, b);
    fx_end(&f);
}

/* While the host runs ahead, every window between two events is the model's time of the kernels
 * between them, exactly (float milliseconds: a few nanoseconds). The host runs ahead for sure: it
 * enqueues everything behind a closed gate, which also shows that enqueueing never waits for the
 * device. */
static void test_event_elapsed_exact(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 0);
    const prs_gpu_preset *p = prs_gpu_preset_find("a100");
    prs_gpu_work w[3] = {{0.005, 0.85}, {0.012, 0.79}, {0.020, 0.5}};
    prs_event *ev[7];
    for (int i = 0; i < 7; i++)
        assert_int_equal(prs_event_new(f.s, &ev[i]), 0);
    fakecu_gate gate = FAKECU_GATE_INIT;
    assert_int_equal(fakecu_gate_close(&cu, &gate, f.cs), CUDA_SUCCESS);
    assert_int_equal(prs_event_record(f.s, ev[0]), 0);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(cu.launch_work(f.cs, w[i % 3].t_ref_s, w[i % 3].alpha, 0), CUDA_SUCCESS);
        assert_int_equal(prs_event_record(f.s, ev[i + 1]), 0);
    }
    assert_int_equal(prs_event_query(f.s, ev[6]), 0); /* the host is ahead */
    fakecu_gate_open(&gate);
    assert_int_equal(prs_event_wait(f.s, ev[6]), 0);
    for (int i = 0; i < 6; i++) {
        double model = prs_gpu_time_s(p, &w[i % 3], p->f_max_mhz) + FAKECU_EVENT_S;
        assert_true(fabs(elapsed(f.s, ev[i], ev[i + 1]) - model) < 5e-7);
    }
    for (int i = 0; i < 7; i++)
        prs_event_free(f.s, ev[i]);
    fx_end(&f);
}

/* An operation never starts before the host enqueued it: a host that falls behind leaves the
 * device idle, and the idle time is in the window. Driver events here, to read their model
 * instants beside the host's. */
static double event_s(CUevent e)
{
    double t = -1;
    assert_int_equal(cu.event_time(e, &t), CUDA_SUCCESS);
    return t;
}

static void test_host_behind(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 0);
    CUevent ev[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventCreate(&ev[i], 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(ev[0], f.cs), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(f.cs, 0.005, 1.0, 0), CUDA_SUCCESS);
    sleep_s(0.030); /* the host falls behind (the situation under test, not a synchronisation) */
    double h1 = mono_s();
    assert_int_equal(cu.cuEventRecord(ev[1], f.cs), CUDA_SUCCESS);
    assert_int_equal(cu.launch_work(f.cs, 0.005, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventRecord(ev[2], f.cs), CUDA_SUCCESS);
    assert_int_equal(cu.cuEventSynchronize(ev[2]), CUDA_SUCCESS);
    double seen = mono_s();
    /* ev[1] is not before its enqueueing, though the device was free 5 ms after ev[0]. */
    assert_true(event_s(ev[1]) >= h1);
    assert_true(event_s(ev[1]) >= event_s(ev[0]) + 0.005 - 1e-6);
    /* The second kernel: its model time, plus at most the host's time between the two calls. */
    assert_true(event_s(ev[2]) >= event_s(ev[1]) + 0.005 - 1e-6 && event_s(ev[2]) <= seen);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cu.cuEventDestroy(ev[i]), CUDA_SUCCESS);
    fx_end(&f);
}

typedef struct host_log {
    int order[8];
    double at[8];
    int n;
} host_log;

typedef struct host_arg {
    host_log *log;
    int id;
    double sleep_s;
} host_arg;

static void host_fn(void *user)
{
    host_arg *a = user;
    a->log->at[a->log->n] = mono_s();
    a->log->order[a->log->n++] = a->id;
    if (a->sleep_s > 0) sleep_s(a->sleep_s);
}

/* Host functions run in stream order, after the work before them, and the stream waits for them.
 */
static void test_host_fn_order(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 0);
    host_log log = {{0}, {0}, 0};
    host_arg args[4] = {{&log, 1, 0}, {&log, 2, 0}, {&log, 3, 0.020}, {&log, 4, 0}};
    prs_event *e, *g;
    assert_int_equal(prs_event_new(f.s, &e), 0);
    assert_int_equal(prs_event_new(f.s, &g), 0);
    fakecu_gate gate = FAKECU_GATE_INIT; /* g is not reached before the gate opens */
    assert_int_equal(fakecu_gate_close(&cu, &gate, f.cs), CUDA_SUCCESS);
    assert_int_equal(prs_stream_host_fn(f.s, host_fn, &args[0]), 0);
    assert_int_equal(cu.launch_work(f.cs, 0.010, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(prs_stream_host_fn(f.s, host_fn, &args[1]), 0);
    assert_int_equal(prs_event_record(f.s, e), 0);
    assert_int_equal(prs_stream_host_fn(f.s, host_fn, &args[2]), 0);
    assert_int_equal(prs_event_record(f.s, g), 0);
    assert_int_equal(cu.launch_work(f.cs, 0.005, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(prs_stream_host_fn(f.s, host_fn, &args[3]), 0);
    assert_int_equal(prs_event_query(f.s, g), 0);
    fakecu_gate_open(&gate);
    assert_int_equal(cu.cuStreamSynchronize(f.cs), CUDA_SUCCESS);
    assert_int_equal(log.n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(log.order[i], i + 1);
    assert_true(log.at[1] - log.at[0] >= 0.010 - 1e-4); /* after the kernel */
    assert_true(log.at[3] - log.at[2] >= 0.025 - 1e-4); /* after the sleep and the kernel */
    /* The stream waited for the function: from e (after function 2 returned) to g (after
     * function 3 returned, before function 4 ran). */
    double held = elapsed(f.s, e, g);
    assert_true(held >= 0.020 && held <= log.at[3] - log.at[1]);
    prs_event_free(f.s, e);
    prs_event_free(f.s, g);
    fx_end(&f);
}

typedef struct setter {
    prs_gpu *gpu;
    int mhz;
} setter;

static void set_clock_fn(void *user)
{
    setter *s = user;
    prs_gpu_set_clock(s->gpu, s->mhz);
}

/* Ten 5 ms computations alternating between two clocks. A clock change enqueued as a host function
 * just before each one takes effect when the device gets there: all of each computation runs at
 * its clock. The same requests made by the host when it enqueues (running ahead) miss. */
static void test_clock_in_stream_order(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 0);
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml(0, getenv("PRS_FAKE_NVML"), &g, &e), 0);
    int clocks[2] = {1410, 1005};
    setter set[2] = {{g, clocks[0]}, {g, clocks[1]}};
    double busy, at, share[2];
    for (int mode = 0; mode < 2; mode++) {
        cu.reset_stats();
        fakecu_gate gate = FAKECU_GATE_INIT; /* the host ahead of every computation */
        assert_int_equal(fakecu_gate_close(&cu, &gate, f.cs), CUDA_SUCCESS);
        for (int k = 0; k < 10; k++) {
            if (mode == 0)
                assert_int_equal(prs_stream_host_fn(f.s, set_clock_fn, &set[k % 2]), 0);
            else
                assert_int_equal(prs_gpu_set_clock(g, clocks[k % 2]), 0);
            assert_int_equal(cu.launch_work(f.cs, 0.005, 0.85, clocks[k % 2]), CUDA_SUCCESS);
        }
        fakecu_gate_open(&gate);
        assert_int_equal(cu.cuStreamSynchronize(f.cs), CUDA_SUCCESS);
        cu.clock_share(&busy, &at);
        share[mode] = at / busy;
    }
    print_message("share of device time at the planned clock: %.4f in stream order, %.4f from "
                  "the host\n",
                  share[0], share[1]);
    assert_true(share[0] >= 0.999);
    assert_true(share[1] < 0.7);
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    prs_gpu_close(g);
    fx_end(&f);
}

/* The context's device UUID, as NVML names the same device. */
static void test_device_uuid(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 2);
    char id[64];
    assert_int_equal(prs_stream_device_uuid(f.s, id, sizeof id), 0);
    assert_int_equal(strlen(id), 40);
    void *nv = dlopen(getenv("PRS_FAKE_NVML"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(nv);
    int (*init)(void) = NULL, (*shutdown)(void) = NULL;
    int (*by_uuid)(const char *, void **) = NULL;
    int (*by_index)(unsigned, void **) = NULL;
    assert_int_equal(fakecu_sym(nv, &init, sizeof init, "nvmlInit_v2"), 0);
    assert_int_equal(fakecu_sym(nv, &shutdown, sizeof shutdown, "nvmlShutdown"), 0);
    assert_int_equal(fakecu_sym(nv, &by_uuid, sizeof by_uuid, "nvmlDeviceGetHandleByUUID"), 0);
    assert_int_equal(fakecu_sym(nv, &by_index, sizeof by_index, "nvmlDeviceGetHandleByIndex_v2"),
                     0);
    assert_int_equal(init(), 0);
    void *h, *h2;
    assert_int_equal(by_uuid(id, &h), 0);
    assert_int_equal(by_index(2, &h2), 0);
    assert_ptr_equal(h, h2);
    assert_int_equal(shutdown(), 0);
    dlclose(nv);

    /* The nvml backend opened by that UUID drives this stream's GPU: a clock it locks is the
     * clock the stream's kernels run at (705 MHz: twice as long for compute-bound work). */
    char spec[80];
    snprintf(spec, sizeof spec, "nvml:%s", id);
    setenv("PRS_NVML_LIBRARY", getenv("PRS_FAKE_NVML"), 1);
    prs_gpu *g = NULL;
    prs_error e;
    assert_int_equal(prs_gpu_open(spec, &g, &e), 0);
    assert_int_equal(prs_gpu_set_clock(g, 705), 0);
    prs_event *a, *b;
    assert_int_equal(prs_event_new(f.s, &a), 0);
    assert_int_equal(prs_event_new(f.s, &b), 0);
    fakecu_gate gate = FAKECU_GATE_INIT; /* the launch right behind the record */
    assert_int_equal(fakecu_gate_close(&cu, &gate, f.cs), CUDA_SUCCESS);
    assert_int_equal(prs_event_record(f.s, a), 0);
    assert_int_equal(cu.launch_work(f.cs, 0.010, 1.0, 0), CUDA_SUCCESS);
    assert_int_equal(prs_event_record(f.s, b), 0);
    fakecu_gate_open(&gate);
    assert_int_equal(prs_event_wait(f.s, b), 0);
    assert_true(fabs(elapsed(f.s, a, b) - 0.020) < 1e-5);
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    prs_gpu_close(g);
    assert_int_equal(prs_gpu_open("nvml:GPU-00000000-0000-0000-0000-000000000000", &g, &e),
                     PRS_EGPU);
    assert_non_null(strstr(e.msg, "nvmlDeviceGetHandleByUUID"));
    unsetenv("PRS_NVML_LIBRARY");
    prs_event_free(f.s, a);
    prs_event_free(f.s, b);
    fx_end(&f);
}

static void noop_fn(void *user)
{
    (void)user;
}

/* The hook path's cost on the fake: record + host function, per pair. It never waits for the
 * device (all of it is enqueued behind a closed gate) and costs little of the thread's own CPU
 * time (a loose bound here, immune to the thread being preempted; the benchmark measures it). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Host-side CPU cost of a record and a host function enqueued behind a busy device, in batches
 * that stay below the depth at which recording holds the host. */
static void test_enqueue_cost(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 0);
    prs_event *ev;
    assert_int_equal(prs_event_new(f.s, &ev), 0);
    int batch = FAKECU_HOSTFN_DEPTH - 2, n = 0;
    double cpu = 0;
    for (int b = 0; b < 40; b++) {
        fakecu_gate gate = FAKECU_GATE_INIT; /* the device is busy */
        assert_int_equal(fakecu_gate_close(&cu, &gate, f.cs), CUDA_SUCCESS);
        double t0 = thread_cpu_s();
        for (int i = 0; i < batch; i++, n++) {
            assert_int_equal(prs_event_record(f.s, ev), 0);
            assert_int_equal(prs_stream_host_fn(f.s, noop_fn, NULL), 0);
        }
        cpu += thread_cpu_s() - t0;
        assert_int_equal(prs_event_query(f.s, ev), 0);
        fakecu_gate_open(&gate);
        assert_int_equal(cu.cuStreamSynchronize(f.cs), CUDA_SUCCESS);
    }
    double per = cpu / n;
    print_message("record + host function enqueue: %.0f ns of CPU per pair\n", per * 1e9);
    assert_true(per < 50e-6);
    prs_event_free(f.s, ev);
    fx_end(&f);
}

static void counting_fn(void *user)
{
    _Atomic int *ran = user;
    sleep_s(0.001); /* the host function's own work: the stream waits for it */
    atomic_fetch_add(ran, 1);
}

/* An H100's driver holds a record while about 53 host functions are pending on the stream: when
 * prs_event_record returns behind 200 of them, at least 200 - depth + 1 have run. */
static void test_record_held_by_host_fns(void **state)
{
    if (!cu_path) prs_skip_input("no fake libcuda (PRS_FAKE_CUDA)");
    fixture f;
    fx_begin(&f, 0);
    prs_event *ev;
    assert_int_equal(prs_event_new(f.s, &ev), 0);
    _Atomic int ran = 0;
    long held = cu.records_held();
    int n = 200;
    for (int i = 0; i < n; i++)
        assert_int_equal(prs_stream_host_fn(f.s, counting_fn, (void *)&ran), 0);
    assert_int_equal(prs_event_record(f.s, ev), 0);
    int seen = atomic_load(&ran);
    assert_true(seen >= n - FAKECU_HOSTFN_DEPTH + 1);
    assert_int_equal(cu.records_held(), held + 1);
    assert_int_equal(cu.cuStreamSynchronize(f.cs), CUDA_SUCCESS);
    assert_int_equal(atomic_load(&ran), n);
    prs_event_free(f.s, ev);
    fx_end(&f);
}

int main(void)
{
    setenv("PRS_FAKE_GPU_COUNT", "4", 1);
    const char *lib = getenv("PRS_FAKE_CUDA");
    if (lib && *lib) {
        if (fakecu_load(&cu, lib)) {
            fprintf(stderr, "cannot load %s: %s\n", lib, dlerror());
            return 1;
        }
        if (cu.cuInit(0) != CUDA_SUCCESS) return 1;
        cu_path = lib;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_event_elapsed_exact),
        cmocka_unit_test(test_host_behind),
        cmocka_unit_test(test_host_fn_order),
        cmocka_unit_test(test_clock_in_stream_order),
        cmocka_unit_test(test_device_uuid),
        cmocka_unit_test(test_enqueue_cost),
        cmocka_unit_test(test_record_held_by_host_fns),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
