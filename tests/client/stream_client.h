/* Shared by the tests that drive one device-stream client on the fake libcuda and NVML without a
 * server (test_devtime_tags.c, test_round_bound.c, test_throttled.c): a client on a new stream
 * of device 0 whose reports stay queued, and a profiling schedule handed to it as if the server
 * had sent it (the tests reach into client_int.h for both). Header-only. */
#ifndef PRS_TEST_STREAM_CLIENT_H
#define PRS_TEST_STREAM_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "fake_cuda.h"
#include "perseus/client.h"

/* Profiling at mhz in round 1, as if the server had sent it. */
static inline void stream_client_set_profiling(prs_client *c, int mhz)
{
    pthread_mutex_lock(&c->mu);
    prs__client_schedule *s = &c->latest;
    free(s->clocks);
    memset(s, 0, sizeof *s);
    snprintf(s->phase, sizeof s->phase, "profiling");
    s->round = 1;
    s->plan_id = -1;
    s->from_iteration = -1;
    s->n = 1;
    s->clocks = malloc(sizeof(int));
    assert_non_null(s->clocks);
    s->clocks[0] = mhz;
    atomic_fetch_add(&c->latest_version, 1);
    pthread_mutex_unlock(&c->mu);
}

/* A client on a new stream (*cs) of device 0's primary context, made current, through cu (loaded
 * from cu_path), with a private clock controller and no warm-up; its server is nobody, so its
 * reports stay queued for the test to read. */
static inline prs_client *stream_client_open(const fakecu_api *cu, const char *cu_path,
                                             CUstream *cs)
{
    CUcontext ctx;
    assert_int_equal(cu->cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cu->cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cu->cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(cu->cuStreamCreate(cs, 0), CUDA_SUCCESS);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = "http://127.0.0.1:9"; /* nobody: the reports stay queued */
    o.job_id = "job";
    o.token = "token";
    o.use_stream = 1;
    o.stream = (uintptr_t)*cs;
    o.controller = PRS_CLOCKCTL_PROCESS;
    o.warmup_iterations = 0;
    o.cuda_library = cu_path;
    prs_client *c;
    prs_error e;
    if (prs_client_new(&o, &c, &e)) fail_msg("prs_client_new: %s", e.msg);
    return c;
}

/* Free the client, then its stream and the context stream_client_open retained. */
static inline void stream_client_close(const fakecu_api *cu, prs_client *c, CUstream cs)
{
    prs_client_free(c);
    assert_int_equal(cu->cuStreamDestroy(cs), CUDA_SUCCESS);
    assert_int_equal(cu->cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu->cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
}

#endif
