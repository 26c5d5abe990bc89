/* Device streams on the CUDA driver API (perseus/stream.h), loaded at run time.
 *
 * We dlopen("libcuda.so.1") (or a path: tests load a fake one on the GPU model) and resolve the
 * calls we use against our own declarations of their C signatures. The symbols are the exported
 * names the driver's cuda.h maps the plain names to: cuEventDestroy_v2; cuDeviceGetUuid_v2
 * (drivers since CUDA 11.4) with cuDeviceGetUuid as a fallback; cuEventElapsedTime_v2 (what
 * CUDA 12.8 and later headers call) with cuEventElapsedTime as a fallback. Stream-ordered calls
 * (cuEventRecord, cuLaunchHostFunc) use the plain names, the legacy default-stream variants.
 * The library handle is a reference: when the framework already loaded the driver, dlopen returns
 * the same instance, with the same contexts and streams; it is never unmapped (RTLD_NODELETE).
 *
 * The same loader serves device selection (prs__gpu_cuda_device_uuid: cuInit, cuDeviceGetCount,
 * cuDeviceGet, cuDeviceGetUuid): the UUID of CUDA device N as the driver enumerates it, after
 * CUDA_VISIBLE_DEVICES. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"
#include "perseus/stream.h"

/* Our declarations of the driver's types: an int result, an int device ordinal, opaque pointers
 * for contexts, streams and events, 16 bytes of UUID. */
typedef int cu_result;
typedef int cu_device;
typedef struct cu_ctx_st *cu_context;
typedef struct cu_stream_st *cu_stream;
typedef struct cu_event_st *cu_event;
typedef struct cu_uuid {
    unsigned char bytes[16];
} cu_uuid;

#define CU_SUCCESS 0
#define CU_ERROR_NOT_READY 600

typedef struct cu_api {
    void *lib;
    cu_result (*init)(unsigned);
    cu_result (*error_name)(cu_result, const char **);
    cu_result (*error_string)(cu_result, const char **);
    cu_result (*ctx_get_current)(cu_context *);
    cu_result (*ctx_get_device)(cu_device *);
    cu_result (*device_count)(int *);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*device_uuid)(cu_uuid *, cu_device);
    cu_result (*event_create)(cu_event *, unsigned);
    cu_result (*event_destroy)(cu_event);
    cu_result (*event_record)(cu_event, cu_stream);
    cu_result (*event_query)(cu_event);
    cu_result (*event_sync)(cu_event);
    cu_result (*event_elapsed)(float *, cu_event, cu_event);
    cu_result (*launch_host_fn)(cu_stream, void (*)(void *), void *);
} cu_api;

struct prs_stream {
    cu_api cu;
    cu_stream stream;
    cu_device device;
    char errmsg[256];
};

struct prs_event {
    cu_event ev;
};

static int fail(prs_stream *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(prs_stream *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* va_start above initialises ap: LLVM 14 reports this when one clang-tidy run analyses the
     * file twice (it is built into two targets) */
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized)
    vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

/* "CUDA_ERROR_X (text)" of a result, or its number when the driver does not know it. */
static void describe(const cu_api *cu, cu_result r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (cu->error_name && cu->error_name(r, &name) != CU_SUCCESS) name = NULL;
    if (cu->error_string && cu->error_string(r, &text) != CU_SUCCESS) text = NULL;
    if (name)
        snprintf(buf, n, "%s (%s)", name, text ? text : "no description");
    else
        snprintf(buf, n, "CUDA error %d", r);
}

static int cu_fail(prs_stream *s, const char *call, cu_result r)
{
    char d[160];
    describe(&s->cu, r, d, sizeof d);
    return fail(s, PRS_EGPU, "CUDA %s: %s", call, d);
}

/* dlsym into a function pointer without the object-to-function pointer cast warning; 0 when
 * found. */
static int sym(void *lib, void *fnptr, size_t size, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) return -1;
    memcpy(fnptr, &p, size);
    return 0;
}

static int load(cu_api *cu, const char *lib_path, prs_error *err)
{
    if (!lib_path || !*lib_path) lib_path = getenv("PRS_CUDA_LIBRARY");
    if (!lib_path || !*lib_path) lib_path = "libcuda.so.1";
    memset(cu, 0, sizeof *cu);
    /* Never unmapped: the driver keeps threads of its own once initialised. */
    cu->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!cu->lib) {
        const char *why = dlerror();
        prs_error_set(err, PRS_ENOLIB,
                      "cannot load the CUDA driver library %s: %s (is the NVIDIA driver "
                      "installed?)",
                      lib_path, why ? why : "unknown reason");
        return PRS_ENOLIB; /* as prs_error_set returns: visibly non-zero to analysis */
    }
    struct {
        void *fn;
        size_t size;
        const char *name, *fallback;
    } want[] = {
        {&cu->init, sizeof cu->init, "cuInit", NULL},
        {&cu->error_name, sizeof cu->error_name, "cuGetErrorName", NULL},
        {&cu->error_string, sizeof cu->error_string, "cuGetErrorString", NULL},
        {&cu->ctx_get_current, sizeof cu->ctx_get_current, "cuCtxGetCurrent", NULL},
        {&cu->ctx_get_device, sizeof cu->ctx_get_device, "cuCtxGetDevice", NULL},
        {&cu->device_count, sizeof cu->device_count, "cuDeviceGetCount", NULL},
        {&cu->device_get, sizeof cu->device_get, "cuDeviceGet", NULL},
        {&cu->device_uuid, sizeof cu->device_uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"},
        {&cu->event_create, sizeof cu->event_create, "cuEventCreate", NULL},
        {&cu->event_destroy, sizeof cu->event_destroy, "cuEventDestroy_v2", NULL},
        {&cu->event_record, sizeof cu->event_record, "cuEventRecord", NULL},
        {&cu->event_query, sizeof cu->event_query, "cuEventQuery", NULL},
        {&cu->event_sync, sizeof cu->event_sync, "cuEventSynchronize", NULL},
        {&cu->event_elapsed, sizeof cu->event_elapsed, "cuEventElapsedTime_v2",
         "cuEventElapsedTime"},
        {&cu->launch_host_fn, sizeof cu->launch_host_fn, "cuLaunchHostFunc", NULL},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (sym(cu->lib, want[i].fn, want[i].size, want[i].name) == 0) continue;
        if (want[i].fallback && sym(cu->lib, want[i].fn, want[i].size, want[i].fallback) == 0)
            continue;
        dlclose(cu->lib);
        memset(cu, 0, sizeof *cu);
        prs_error_set(err, PRS_ENOLIB, "CUDA driver library %s lacks symbol %s (driver too old?)",
                      lib_path, want[i].name);
        return PRS_ENOLIB; /* as prs_error_set returns: visibly non-zero to analysis */
    }
    return 0;
}

int prs_stream_open_cuda(uintptr_t handle, const char *lib_path, prs_stream **out, prs_error *err)
{
    *out = NULL;
    prs_stream *s = calloc(1, sizeof *s);
    if (!s) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = load(&s->cu, lib_path, err);
    if (rc) {
        free(s);
        return rc;
    }
    cu_context ctx = NULL;
    cu_result r = s->cu.init(0);
    if (r == CU_SUCCESS) r = s->cu.ctx_get_current(&ctx);
    if (r != CU_SUCCESS || !ctx) {
        char d[160];
        if (r != CU_SUCCESS)
            describe(&s->cu, r, d, sizeof d);
        else
            snprintf(d, sizeof d, "no context is current");
        prs_error_set(err, PRS_EGPU,
                      "CUDA stream: %s on this thread: initialise CUDA on this thread first (the "
                      "framework's device and stream, e.g. torch.cuda.set_device and one CUDA "
                      "operation) and open the stream from the same thread",
                      d);
        prs_stream_close(s);
        return PRS_EGPU;
    }
    if ((r = s->cu.ctx_get_device(&s->device)) != CU_SUCCESS) {
        char d[160];
        describe(&s->cu, r, d, sizeof d);
        prs_error_set(err, PRS_EGPU, "CUDA cuCtxGetDevice: %s", d);
        prs_stream_close(s);
        return PRS_EGPU;
    }
    s->stream = (cu_stream)handle;
    *out = s;
    return 0;
}

void prs_stream_close(prs_stream *s)
{
    if (!s) return;
    if (s->cu.lib) dlclose(s->cu.lib);
    free(s);
}

const char *prs_stream_errmsg(const prs_stream *s)
{
    return s->errmsg;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (n >= 41). */
static void format_uuid(const cu_uuid *u, char *buf, size_t n)
{
    const unsigned char *b = u->bytes;
    snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

int prs_stream_device_uuid(prs_stream *s, char *buf, size_t n)
{
    if (!buf || n < 41) return fail(s, PRS_EINVAL, "device UUID: the buffer needs 41 bytes");
    cu_uuid u;
    cu_result r = s->cu.device_uuid(&u, s->device);
    if (r != CU_SUCCESS) return cu_fail(s, "cuDeviceGetUuid", r);
    format_uuid(&u, buf, n);
    return 0;
}

/* The device lookup's failure: the call, the driver's answer, and CUDA_VISIBLE_DEVICES. */
static int lookup_fail(const cu_api *cu, const char *call, cu_result r, prs_error *err)
{
    char d[160];
    describe(cu, r, d, sizeof d);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    return prs_error_set(err, PRS_EGPU, "CUDA %s: %s (CUDA_VISIBLE_DEVICES %s%.200s%s)", call, d,
                         cvd ? "= '" : "unset", cvd ? cvd : "", cvd ? "'" : "");
}

static int device_uuid_at(const cu_api *cu, int ordinal, char *buf, size_t n, int *count,
                          prs_error *err)
{
    cu_result r = cu->init(0);
    if (r != CU_SUCCESS) return lookup_fail(cu, "cuInit", r, err);
    if ((r = cu->device_count(count)) != CU_SUCCESS)
        return lookup_fail(cu, "cuDeviceGetCount", r, err);
    if (ordinal < 0 || ordinal >= *count) return 0; /* the caller words the error */
    cu_device dev = 0;
    if ((r = cu->device_get(&dev, ordinal)) != CU_SUCCESS)
        return lookup_fail(cu, "cuDeviceGet", r, err);
    cu_uuid u;
    if ((r = cu->device_uuid(&u, dev)) != CU_SUCCESS)
        return lookup_fail(cu, "cuDeviceGetUuid", r, err);
    format_uuid(&u, buf, n);
    return 0;
}

int prs__gpu_cuda_device_uuid(const char *lib_path, int ordinal, char *buf, size_t n, int *count,
                              prs_error *err)
{
    *count = 0;
    if (!buf || n < 41)
        return prs_error_set(err, PRS_EINVAL, "device UUID: the buffer needs 41 bytes");
    buf[0] = '\0';
    cu_api cu;
    int rc = load(&cu, lib_path, err);
    if (rc) return rc;
    rc = device_uuid_at(&cu, ordinal, buf, n, count, err);
    dlclose(cu.lib);
    return rc;
}

int prs_event_new(prs_stream *s, prs_event **out)
{
    *out = NULL;
    prs_event *e = malloc(sizeof *e);
    if (!e) return fail(s, PRS_ENOMEM, "out of memory");
    cu_result r = s->cu.event_create(&e->ev, 0);
    if (r != CU_SUCCESS) {
        free(e);
        return cu_fail(s, "cuEventCreate", r);
    }
    *out = e;
    return 0;
}

void prs_event_free(prs_stream *s, prs_event *e)
{
    if (!e) return;
    s->cu.event_destroy(e->ev);
    free(e);
}

int prs_event_record(prs_stream *s, prs_event *e)
{
    cu_result r = s->cu.event_record(e->ev, s->stream);
    return r == CU_SUCCESS ? 0 : cu_fail(s, "cuEventRecord", r);
}

int prs_event_query(prs_stream *s, prs_event *e)
{
    cu_result r = s->cu.event_query(e->ev);
    if (r == CU_SUCCESS) return 1;
    if (r == CU_ERROR_NOT_READY) return 0;
    return cu_fail(s, "cuEventQuery", r);
}

int prs_event_wait(prs_stream *s, prs_event *e)
{
    cu_result r = s->cu.event_sync(e->ev);
    return r == CU_SUCCESS ? 0 : cu_fail(s, "cuEventSynchronize", r);
}

int prs_event_elapsed_s(prs_stream *s, prs_event *a, prs_event *b, double *seconds)
{
    float ms = 0;
    cu_result r = s->cu.event_elapsed(&ms, a->ev, b->ev);
    if (r != CU_SUCCESS) return cu_fail(s, "cuEventElapsedTime", r);
    *seconds = 1e-3 * (double)ms;
    return 0;
}

int prs_stream_host_fn(prs_stream *s, void (*fn)(void *user), void *user)
{
    if (!fn) return fail(s, PRS_EINVAL, "host function: fn is NULL");
    cu_result r = s->cu.launch_host_fn(s->stream, fn, user);
    return r == CU_SUCCESS ? 0 : cu_fail(s, "cuLaunchHostFunc", r);
}
