/* A client on the CUDA stream of a MIG instance (the fake driver with PRS_FAKE_CUDA_MIG=1 names
 * the device by a UUID NVML does not list, as CUDA names a MIG instance): prs_client_new must
 * refuse it saying MIG, not only NVML's "Not Found". The same stream on a whole GPU starts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_dir.h"
#include "perseus/client.h"
#include "skips.h"

static fakecu_api cu;

static int start(const char *cu_path, CUstream cs, prs_error *e)
{
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1;
    o.use_stream = 1;
    o.stream = (uintptr_t)cs;
    o.cuda_library = cu_path;
    prs_client *c = NULL;
    int rc = prs_client_new(&o, &c, e);
    if (!rc) prs_client_free(c);
    return rc;
}

static void test_mig_stream(void **state)
{
    const char *cu_path = getenv("PRS_FAKE_CUDA"), *nvml_path = getenv("PRS_FAKE_NVML");
    if (!cu_path || !*cu_path || !nvml_path || !*nvml_path || fakecu_load(&cu, cu_path)) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "mig"), 0);
    setenv("PRS_NVML_LIBRARY", nvml_path, 1);
    setenv("PRS_FAKE_GPU_COUNT", "1", 1);
    CUcontext ctx;
    CUstream cs;
    assert_int_equal(cu.cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    assert_int_equal(cu.cuStreamCreate(&cs, 0), CUDA_SUCCESS);
    prs_error e;
    setenv("PRS_FAKE_CUDA_MIG", "1", 1);
    int rc = start(cu_path, cs, &e);
    unsetenv("PRS_FAKE_CUDA_MIG");
    print_message("MIG stream: %s\n", e.msg);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(e.msg, "MIG"));
    assert_non_null(strstr(e.msg, "CUDA stream's device"));
    if (start(cu_path, cs, &e)) fail_msg("a whole GPU: %s", e.msg);
    assert_int_equal(cu.cuStreamDestroy(cs), CUDA_SUCCESS);
    assert_int_equal(cu.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    assert_int_equal(cu.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    fake_dir_end(dir, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mig_stream),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
