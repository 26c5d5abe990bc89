/* The fake libcuda.so.1 of the tests (fake_cuda.c): the CUDA driver calls that perseus/stream.h
 * uses, plus what a test needs to stand in for a training framework (initialise, take a device's
 * primary context, make streams, wait for a context's streams), on the fake devices of fake_gpu.h,
 * and test-only calls that put work on a stream. The library is built in build/tests/fake_cuda/;
 * tests get its path in $PRS_FAKE_CUDA and load it with dlopen (fakecu_load below), like a
 * framework's libcuda.
 *
 * Semantics kept from the real driver: CUDA_VISIBLE_DEVICES, read at the first cuInit (unset:
 * every device; else the listed devices in list order, each an index or a unique prefix of a
 * "GPU-..." UUID, up to the first invalid or repeated entry; MIG entries are not modelled and
 * count as invalid; no device left: cuInit returns CUDA_ERROR_NO_DEVICE), so cuDeviceGetCount,
 * cuDeviceGet and cuDeviceGetUuid see the permuted subset; result codes (CUresult values below), a
 * thread-local current context, cuEventQuery of a never-recorded event succeeds, cuEventElapsedTime
 * needs both events recorded (CUDA_ERROR_INVALID_HANDLE) and complete (CUDA_ERROR_NOT_READY),
 * stream handle 0 (and CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) is the current context's default
 * stream, host functions run on a driver thread in stream order and the stream waits for them,
 * cuStreamWaitEvent makes a stream wait for another stream's record, cuEventRecord holds the
 * host while FAKECU_HOSTFN_DEPTH host functions are pending on the stream (an H100's driver held
 * it from about 53; $PRS_FAKE_CUDA_HOSTFN_DEPTH, read at the first cuInit, changes the depth,
 * 0 lifts the limit), cuMemAlloc_v2 / cuMemFree_v2 /
 * cuMemsetD32Async (sizes checked, nothing allocated; a memset is memory-bound work drawing less
 * power than a kernel), modules of PTX text and their kernels (cuModuleLoadData[Ex],
 * cuModuleGetFunction, cuLaunchKernel: no code runs; a kernel is compute-bound work of its threads
 * times its first parameter, read as a 32-bit loop count, at FAKECU_LOOP_RATE thread-iterations a
 * second at f_max). Each stream is an ordered queue run by its own thread; its device time is
 * model time: an operation starts when the previous one ended or, if later, when the host
 * enqueued it, a kernel lasts what the GPU model says, a cross-stream wait or a barrier goes on
 * from the model instant of the record or of the last arrival, whenever the thread happens to
 * run (a preempted thread delays what readers of the energy counter see, through its hold on the
 * device, never the device's timeline). Only a host function's return is a host instant: the
 * stream waits for it, as on a GPU. Simplifications: the default stream does not synchronise with
 * the other streams; cuStreamDestroy and cuEventDestroy wait for the queued work that uses them; a
 * context's streams are destroyed when its primary context is released for the last time. */
#ifndef PRS_FAKE_CUDA_H
#define PRS_FAKE_CUDA_H

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;
typedef void (*CUhostFn)(void *user);
typedef unsigned long long CUdeviceptr;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_UNKNOWN = 999
};

#define FAKECU_EVENT_DISABLE_TIMING 0x2u
/* Thread-iterations a second a kernel runs at f_max (about an H100's rate for a loop of 8 FP32
 * fused multiply-adds a thread). */
#define FAKECU_LOOP_RATE 4e12
/* Device time an event takes: the next operation starts this much after its timestamp (two
 * events back to back measured 1.9-2.1 us apart on an H100). */
#define FAKECU_EVENT_S 2e-6
/* Host functions pending on a stream from which cuEventRecord holds the host (default). */
#define FAKECU_HOSTFN_DEPTH 53

/* ---- test-only exports ---- */

/* Enqueue one kernel on stream s: work (t_ref_s, alpha) of the GPU model, lasting what the model
 * says at the clock in effect while it runs (piecewise when the clock changes mid-kernel), drawing
 * busy power. planned_mhz > 0 tracks it: its device time and the part run at planned_mhz are
 * added to the process's totals (fakecuClockShare). */
CUresult fakecuLaunchWork(CUstream s, double t_ref_s, double alpha, int planned_mhz);
/* fakecuLaunchWork drawing power_scale (0, 4] times the model's busy power (a forward drawing
 * half a backward's power, as on real GPUs). */
CUresult fakecuLaunchWorkPower(CUstream s, double t_ref_s, double alpha, int planned_mhz,
                               double power_scale);
/* The model instant (CLOCK_MONOTONIC seconds, as fakegpu_now_s) at which e's latest record
 * completed, so a test can place device events among host instants it measured; the codes of
 * cuEventElapsedTime. */
CUresult fakecuEventTime(CUevent e, double *t_s);
/* Totals over the tracked kernels that finished since the last fakecuResetStats: device time, and
 * the part of it run at each kernel's planned clock (seconds). */
void fakecuClockShare(double *busy_s, double *at_planned_s);
void fakecuResetStats(void);
/* How many cuEventRecord calls of this process waited for the stream's host functions. */
long fakecuRecordsHeld(void);
/* Enqueue a device-side collective on s: the stream waits (the device drawing blocking power)
 * until `parties` streams of this process reached the same generation of the barrier `name`
 * (at most 47 bytes); all continue once the last one arrived, each when its stream's thread
 * runs again. */
CUresult fakecuLaunchBarrier(CUstream s, const char *name, int parties);
/* Stall s's thread for `seconds` of host time before it runs the next operation it takes off the
 * queue, as a preempted driver thread would be: the device's timeline (model time) must not
 * notice. */
CUresult fakecuStall(CUstream s, double seconds);

/* ---- loading it like a framework would ---- */

typedef struct fakecu_api {
    void *lib;
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGetUuid)(CUuuid *uuid, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
    CUresult (*cuStreamDestroy)(CUstream s);
    CUresult (*cuStreamSynchronize)(CUstream s);
    CUresult (*cuEventCreate)(CUevent *e, unsigned flags);
    CUresult (*cuEventDestroy)(CUevent e);
    CUresult (*cuEventRecord)(CUevent e, CUstream s);
    CUresult (*cuEventQuery)(CUevent e);
    CUresult (*cuEventSynchronize)(CUevent e);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent a, CUevent b);
    CUresult (*cuLaunchHostFunc)(CUstream s, CUhostFn fn, void *user);
    CUresult (*launch_work)(CUstream s, double t_ref_s, double alpha, int planned_mhz);
    CUresult (*launch_work_power)(CUstream s, double t_ref_s, double alpha, int planned_mhz,
                                  double power_scale);
    void (*clock_share)(double *busy_s, double *at_planned_s);
    void (*reset_stats)(void);
    CUresult (*launch_barrier)(CUstream s, const char *name, int parties);
    CUresult (*event_time)(CUevent e, double *t_s);
    long (*records_held)(void);
    CUresult (*stall)(CUstream s, double seconds);
} fakecu_api;

static inline int fakecu_sym(void *lib, void *fnptr, size_t size, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) return -1;
    memcpy(fnptr, &p, size);
    return 0;
}

/* dlopen the fake (path: $PRS_FAKE_CUDA) and resolve everything: 0, or -1 (dlerror says why). */
static inline int fakecu_load(fakecu_api *a, const char *path)
{
    memset(a, 0, sizeof *a);
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) return -1;
#define FAKECU_SYM(f, n)                                                                           \
    if (fakecu_sym(a->lib, &a->f, sizeof a->f, n)) goto fail
    FAKECU_SYM(cuInit, "cuInit");
    FAKECU_SYM(cuDeviceGet, "cuDeviceGet");
    FAKECU_SYM(cuDeviceGetCount, "cuDeviceGetCount");
    FAKECU_SYM(cuDeviceGetUuid, "cuDeviceGetUuid_v2");
    FAKECU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    FAKECU_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    FAKECU_SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
    FAKECU_SYM(cuCtxGetCurrent, "cuCtxGetCurrent");
    FAKECU_SYM(cuStreamCreate, "cuStreamCreate");
    FAKECU_SYM(cuStreamDestroy, "cuStreamDestroy_v2");
    FAKECU_SYM(cuStreamSynchronize, "cuStreamSynchronize");
    FAKECU_SYM(cuEventCreate, "cuEventCreate");
    FAKECU_SYM(cuEventDestroy, "cuEventDestroy_v2");
    FAKECU_SYM(cuEventRecord, "cuEventRecord");
    FAKECU_SYM(cuEventQuery, "cuEventQuery");
    FAKECU_SYM(cuEventSynchronize, "cuEventSynchronize");
    FAKECU_SYM(cuEventElapsedTime, "cuEventElapsedTime_v2");
    FAKECU_SYM(cuLaunchHostFunc, "cuLaunchHostFunc");
    FAKECU_SYM(launch_work, "fakecuLaunchWork");
    FAKECU_SYM(launch_work_power, "fakecuLaunchWorkPower");
    FAKECU_SYM(clock_share, "fakecuClockShare");
    FAKECU_SYM(reset_stats, "fakecuResetStats");
    FAKECU_SYM(launch_barrier, "fakecuLaunchBarrier");
    FAKECU_SYM(event_time, "fakecuEventTime");
    FAKECU_SYM(records_held, "fakecuRecordsHeld");
    FAKECU_SYM(stall, "fakecuStall");
#undef FAKECU_SYM
    return 0;
fail:
    dlclose(a->lib);
    a->lib = NULL;
    return -1;
}

/* A gate on a stream (test side): fakecu_gate_close enqueues a host function that holds the
 * stream until fakecu_gate_open. A test closes the gate, enqueues a whole sequence, then opens
 * it: the operations then run back to back, so the device times between them follow from the
 * GPU model alone, however late the host thread that enqueued them ran. The gate must outlive
 * the stream's work (open it, then synchronise, before it goes out of scope). */
typedef struct fakecu_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} fakecu_gate;

#define FAKECU_GATE_INIT                                                                           \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0                                     \
    }

static inline void fakecu_gate_wait(void *arg)
{
    fakecu_gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static inline CUresult fakecu_gate_close(const fakecu_api *a, fakecu_gate *g, CUstream s)
{
    pthread_mutex_lock(&g->mu);
    g->open = 0;
    pthread_mutex_unlock(&g->mu);
    return a->cuLaunchHostFunc(s, fakecu_gate_wait, g);
}

static inline void fakecu_gate_open(fakecu_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

#endif
