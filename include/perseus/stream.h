/* Device streams: time work on the GPU without synchronising it, and run host code when the GPU
 * reaches a point of a stream.
 *
 * A prs_stream wraps a CUDA stream that the training framework owns (for PyTorch,
 * torch.cuda.current_stream().cuda_stream) through the CUDA driver API, loaded at run time with
 * dlopen: no NVIDIA header or library is needed to build, and a host without the driver gets a
 * clean PRS_ENOLIB. Events recorded on the stream take the GPU's timestamp when the stream
 * reaches them; host functions run on a driver thread when the stream reaches them, and the
 * stream waits for them to return.
 *
 * Every CUDA call of a prs_stream and of its events is made on the thread that opened it (the
 * training thread), whose current CUDA context the stream belongs to. Recording an event and
 * enqueueing a host function cost one driver call each: no allocation, no lock of ours.
 *
 * Calls return 0 or a negative PRS_E* code (PRS_EGPU with the driver's error name when the driver
 * refuses); the message of the last failure is read with prs_stream_errmsg. */
#ifndef PERSEUS_STREAM_H
#define PERSEUS_STREAM_H

#include "perseus/export.h"

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct prs_stream prs_stream;
typedef struct prs_event prs_event;

/* Bind to the CUDA stream `handle` (a CUstream cast to uintptr_t; 0 is the legacy default
 * stream) of the CUDA context current on the calling thread. The driver library is lib_path when
 * given, else $PRS_CUDA_LIBRARY, else "libcuda.so.1". Errors: PRS_ENOLIB (library or symbol
 * missing), PRS_EGPU (no current context: initialise CUDA on this thread first; or a driver
 * error). On failure *out is NULL and err says why. */
PRS_API int prs_stream_open_cuda(uintptr_t handle, const char *lib_path, prs_stream **out,
                                 prs_error *err);
/* Free the wrapper (the CUDA stream is the framework's and stays). Free its events first. NULL is
 * a no-op. */
PRS_API void prs_stream_close(prs_stream *s);
/* Message of the last failed call on s ("" if none). */
PRS_API const char *prs_stream_errmsg(const prs_stream *s);

/* The UUID of the context's device as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the form
 * nvidia-smi and NVML (nvmlDeviceGetUUID, nvmlDeviceGetHandleByUUID) use. n >= 41. */
PRS_API int prs_stream_device_uuid(prs_stream *s, char *buf, size_t n);

/* A timing event (CUDA flags 0). Free with prs_event_free before closing the stream. */
PRS_API int prs_event_new(prs_stream *s, prs_event **out);
PRS_API void prs_event_free(prs_stream *s, prs_event *e);
/* Record e on the stream: it completes, with the GPU's timestamp, when the stream gets there. */
PRS_API int prs_event_record(prs_stream *s, prs_event *e);
/* 1 when e's latest record completed (or e was never recorded), 0 when not yet, < 0 on error. */
PRS_API int prs_event_query(prs_stream *s, prs_event *e);
/* Block until e's latest record completed (shutdown paths only: it stalls the host). */
PRS_API int prs_event_wait(prs_stream *s, prs_event *e);
/* Device time from a to b, seconds (resolution about 0.5 µs). Both must be recorded and complete
 * (PRS_EGPU otherwise: query them first). */
PRS_API int prs_event_elapsed_s(prs_stream *s, prs_event *a, prs_event *b, double *seconds);

/* Run fn(user) on a driver thread when the stream reaches this point; the stream waits until fn
 * returns. fn must not call CUDA, and should be short (it holds the GPU's stream). */
PRS_API int prs_stream_host_fn(prs_stream *s, void (*fn)(void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
