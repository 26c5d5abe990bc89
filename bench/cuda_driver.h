/* Shared by the programs of bench/ that need a CUDA context of their own (bench_stream_hooks.c,
 * gpu_probe.c, gpu_attrib.c): the driver library loaded with dlopen and device 0's primary
 * context made current on the calling thread, as a training framework leaves it before our client
 * binds to its stream; device memory and memsets; a host function that notes the host clock.
 * Header-only: each program stays one file. */
#ifndef PRS_BENCH_CUDA_DRIVER_H
#define PRS_BENCH_CUDA_DRIVER_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "perseus/clock.h"

/* A symbol of lib as a function pointer (memcpy: ISO C has no cast between the two kinds). */
#define BENCH_CU_SYM(lib, name, fp)                                                                \
    do {                                                                                           \
        void *p_ = dlsym((lib), (name));                                                           \
        if (!p_) return NULL;                                                                      \
        memcpy(&(fp), &p_, sizeof(fp));                                                            \
    } while (0)

/* Loads lib_path (global, so the client's own dlopen of it shares the handle), initialises the
 * driver and makes device 0's primary context current. Returns the library or NULL. */
static inline void *bench_cuda_context(const char *lib_path)
{
    void *lib = dlopen(lib_path, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return NULL;
    int (*init)(unsigned), (*get)(int *, int), (*retain)(void **, int), (*set)(void *);
    BENCH_CU_SYM(lib, "cuInit", init);
    BENCH_CU_SYM(lib, "cuDeviceGet", get);
    BENCH_CU_SYM(lib, "cuDevicePrimaryCtxRetain", retain);
    BENCH_CU_SYM(lib, "cuCtxSetCurrent", set);
    int dev;
    void *ctx;
    if (init(0) || get(&dev, 0) || retain(&ctx, dev) || set(ctx)) return NULL;
    return lib;
}

/* Device memory: allocate, free, and memset 32-bit words on a stream (NULL: the legacy default
 * stream). */
typedef struct bench_cuda_mem {
    int (*alloc)(uint64_t *, size_t);
    int (*memfree)(uint64_t);
    int (*memset32)(uint64_t, unsigned, size_t, void *);
} bench_cuda_mem;

/* bench_cuda_context, then the memory calls into m; the library, or NULL after printing why. */
static inline void *bench_cuda_mem_load(const char *lib_path, bench_cuda_mem *m)
{
    void *lib = bench_cuda_context(lib_path);
    void *a = NULL, *f = NULL, *z = NULL;
    if (lib) a = dlsym(lib, "cuMemAlloc_v2"), f = dlsym(lib, "cuMemFree_v2");
    if (lib) z = dlsym(lib, "cuMemsetD32Async");
    if (!a || !f || !z) {
        const char *why = dlerror();
        printf("  no CUDA context from %s: %s\n", lib_path, why ? why : "the driver did not start");
        return NULL;
    }
    memcpy(&m->alloc, &a, sizeof a);
    memcpy(&m->memfree, &f, sizeof f);
    memcpy(&m->memset32, &z, sizeof z);
    return lib;
}

/* A host function that writes CLOCK_MONOTONIC seconds into the double at user. */
static inline void bench_note_time(void *user)
{
    *(volatile double *)user = prs_mono_s();
}

#endif
