/* Shared by the programs of bench/ that need a CUDA context of their own (bench_stream_hooks.c,
 * gpu_probe.c): the driver library loaded with dlopen and device 0's primary context made
 * current on the calling thread, as a training framework leaves it before our client binds to
 * its stream. Header-only: each program stays one file. */
#ifndef PRS_BENCH_CUDA_DRIVER_H
#define PRS_BENCH_CUDA_DRIVER_H

#include <dlfcn.h>
#include <string.h>

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

#endif
