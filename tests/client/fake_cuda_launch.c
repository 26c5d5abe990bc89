/* The fake libcuda's memory, modules and launches of work (fake_cuda.h has the semantics): each
 * launch checks its arguments and enqueues one operation on its stream (fake_cuda_int.h). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda_int.h"

#define EXPORT FAKECU_EXPORT

/* ---- memory: sizes only, nothing is allocated; a memset is device work ---- */

#define FAKECU_MEM_SLOTS 64
#define FAKECU_MEM_BASE 0x7f0000000000ull
#define FAKECU_MEMSET_BPS 2.5e12 /* bytes per second a memset writes (HBM-class) */
#define FAKECU_MEMSET_POWER 0.8  /* a memset's power, times a kernel's at the same clock */

static struct {
    CUdeviceptr base;
    size_t bytes;
} g_mem[FAKECU_MEM_SLOTS];
static CUdeviceptr g_mem_next = FAKECU_MEM_BASE;
static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER; /* g_mem, g_mem_next */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t bytes)
{
    CUresult r;
    if (!fakecu__current(&r)) return r;
    if (!out || !bytes) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_mu);
    for (int i = 0; i < FAKECU_MEM_SLOTS; i++)
        if (!g_mem[i].base) {
            g_mem[i].base = *out = g_mem_next;
            g_mem[i].bytes = bytes;
            g_mem_next += (bytes + 0x1fffffull) & ~0x1fffffull; /* 2 MiB pages */
            pthread_mutex_unlock(&g_mem_mu);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    pthread_mutex_lock(&g_mem_mu);
    for (int i = 0; i < FAKECU_MEM_SLOTS; i++)
        if (p && g_mem[i].base == p) {
            g_mem[i].base = 0;
            pthread_mutex_unlock(&g_mem_mu);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_ERROR_INVALID_VALUE;
}

/* Writes n 32-bit words at p, inside one allocation: work of the GPU model lasting the bytes over
 * FAKECU_MEMSET_BPS at f_max, bound by memory (alpha 0), drawing FAKECU_MEMSET_POWER times a
 * kernel's power (work of another kind draws another power, as on a GPU). */
EXPORT CUresult cuMemsetD32Async(CUdeviceptr p, unsigned value, size_t n, CUstream h)
{
    (void)value;
    int inside = 0;
    pthread_mutex_lock(&g_mem_mu);
    for (int i = 0; i < FAKECU_MEM_SLOTS; i++)
        if (g_mem[i].base && p >= g_mem[i].base && n <= (g_mem[i].bytes - (p - g_mem[i].base)) / 4)
            inside = 1;
    pthread_mutex_unlock(&g_mem_mu);
    if (!inside || !n) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    op o = {.kind = OP_WORK, .power_scale = FAKECU_MEMSET_POWER};
    o.u.work.t_ref_s = 4.0 * (double)n / FAKECU_MEMSET_BPS;
    o.u.work.alpha = 0;
    return fakecu__enqueue(s, &o);
}

/* ---- modules and kernels: PTX text; a kernel is a loop count ---- */

#define FAKECU_JIT_ERROR_LOG_BUFFER 5
#define FAKECU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define FAKECU_MODULE_FUNCTIONS 8

struct CUfunc_st {
    char name[64];
};

struct CUmod_st {
    char *ptx;
    int n_fn;
    struct CUfunc_st fn[FAKECU_MODULE_FUNCTIONS];
};

/* Writes msg into the error log the options give, if any (the driver's JIT options). */
static void jit_error(unsigned n, const int *opts, void **vals, const char *msg)
{
    char *buf = NULL;
    size_t size = 0;
    for (unsigned i = 0; opts && vals && i < n; i++) {
        if (opts[i] == FAKECU_JIT_ERROR_LOG_BUFFER) buf = vals[i];
        if (opts[i] == FAKECU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) size = (size_t)(uintptr_t)vals[i];
    }
    if (buf && size) snprintf(buf, size, "%s", msg);
}

/* A module is PTX text: a ".version" directive and at least one ".entry". */
EXPORT CUresult cuModuleLoadDataEx(CUmodule *out, const void *image, unsigned n, int *opts,
                                   void **vals)
{
    CUresult r;
    if (!fakecu__current(&r)) return r;
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    const char *ptx = image;
    if (!strstr(ptx, ".version") || !strstr(ptx, ".entry")) {
        jit_error(n, opts, vals, "fake: not PTX text (no .version or no .entry)");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUmodule m = calloc(1, sizeof *m);
    if (!m || !(m->ptx = strdup(ptx))) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = m;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *out, const void *image)
{
    return cuModuleLoadDataEx(out, image, 0, NULL, NULL);
}

EXPORT CUresult cuModuleUnload(CUmodule m)
{
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    free(m->ptx);
    free(m);
    return CUDA_SUCCESS;
}

/* The entry `name`: ".entry name" followed by a space, a newline or "(". */
EXPORT CUresult cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name)
{
    if (!out || !name || !*name) return CUDA_ERROR_INVALID_VALUE;
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    size_t len = strlen(name);
    if (len >= sizeof m->fn[0].name) return CUDA_ERROR_NOT_FOUND;
    for (int i = 0; i < m->n_fn; i++)
        if (!strcmp(m->fn[i].name, name)) {
            *out = &m->fn[i];
            return CUDA_SUCCESS;
        }
    for (const char *p = strstr(m->ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
        const char *q = p + 6;
        q += strspn(q, " \t\n");
        char end = q[len];
        if (strncmp(q, name, len) != 0 ||
            !(end == ' ' || end == '\t' || end == '\n' || end == '\r' || end == '('))
            continue;
        if (m->n_fn == FAKECU_MODULE_FUNCTIONS) return CUDA_ERROR_OUT_OF_MEMORY;
        snprintf(m->fn[m->n_fn].name, sizeof m->fn[0].name, "%s", name);
        *out = &m->fn[m->n_fn++];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* Compute-bound work (alpha 1) of threads x loop count at FAKECU_LOOP_RATE, the count being the
 * kernel's first parameter (an unsigned 32-bit value). */
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, CUstream h, void **params,
                               void **extra)
{
    (void)shared;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    double threads = (double)gx * gy * gz * bx * by * bz;
    if (!(threads > 0) || (double)bx * by * bz > 1024 || extra || !params || !params[0])
        return CUDA_ERROR_INVALID_VALUE;
    unsigned count;
    memcpy(&count, params[0], sizeof count);
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    op o = {.kind = OP_WORK};
    o.u.work.t_ref_s = (threads * count + 1.2e7) / FAKECU_LOOP_RATE; /* + 3 us: a launch */
    o.u.work.alpha = 1;
    return fakecu__enqueue(s, &o);
}

/* ---- test-only ---- */

EXPORT CUresult fakecuLaunchWork(CUstream h, double t_ref_s, double alpha, int planned_mhz)
{
    if (!(t_ref_s > 0) || !isfinite(t_ref_s) || !(alpha >= 0 && alpha <= 1))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    op o = {.kind = OP_WORK, .planned_mhz = planned_mhz};
    o.u.work.t_ref_s = t_ref_s;
    o.u.work.alpha = alpha;
    return fakecu__enqueue(s, &o);
}

EXPORT CUresult fakecuLaunchWorkPower(CUstream h, double t_ref_s, double alpha, int planned_mhz,
                                      double power_scale)
{
    if (!(power_scale > 0 && power_scale <= 4)) return CUDA_ERROR_INVALID_VALUE;
    if (!(t_ref_s > 0) || !isfinite(t_ref_s) || !(alpha >= 0 && alpha <= 1))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    CUstream s = fakecu__resolve(h, &r);
    if (!s) return r;
    op o = {.kind = OP_WORK, .planned_mhz = planned_mhz, .power_scale = power_scale};
    o.u.work.t_ref_s = t_ref_s;
    o.u.work.alpha = alpha;
    return fakecu__enqueue(s, &o);
}
