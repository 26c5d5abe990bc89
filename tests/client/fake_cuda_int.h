/* Inside the fake libcuda (fake_cuda.c: contexts, streams, events; fake_cuda_launch.c: memory,
 * modules and the launches of work): a stream's operations and how a launch enqueues one. */
#ifndef PRS_FAKE_CUDA_INT_H
#define PRS_FAKE_CUDA_INT_H

#include <stdint.h>

#include "fake_cuda.h"
#include "perseus/gpumodel.h"

#define FAKECU_EXPORT __attribute__((visibility("default")))

enum { OP_WORK, OP_EVENT, OP_HOSTFN, OP_BARRIER, OP_WAIT };

struct barrier;

typedef struct op {
    int kind;
    int planned_mhz;
    double power_scale; /* OP_WORK: times the model's busy power (0: 1) */
    double t_enq;       /* model instant the host enqueued it (set by fakecu__enqueue) */
    union {
        prs_gpu_work work;
        struct {
            CUevent ev;
            uint64_t seq;
        } event; /* OP_EVENT and OP_WAIT */
        struct {
            CUhostFn fn;
            void *user;
        } host;
        struct barrier *barrier;
    } u;
} op;

/* The current context, or NULL with *r set. */
CUcontext fakecu__current(CUresult *r);
/* The stream a handle names (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD: the current context's
 * default stream), or NULL with *r set. */
CUstream fakecu__resolve(CUstream h, CUresult *r);
/* Append o to s (the host side of every launch). */
CUresult fakecu__enqueue(CUstream s, op *o);

#endif
