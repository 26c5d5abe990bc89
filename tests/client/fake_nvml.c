/* A fake libnvidia-ml.so.1 for the tests: the NVML calls the nvml backend uses (src/gpu/nvml.c),
 * implemented on the simulated GPU model (perseus/gpumodel.h, preset $PRS_FAKE_NVML_PRESET or
 * "a100"), so the real dlopen path runs in CI without a GPU.
 *
 * The locked clocks are written to the file $PRS_FAKE_NVML_STATE (when set) after every change,
 * atomically (write a temporary file, rename), as one line:
 *   "locked MIN MAX sets=N resets=M pid=P"  or  "default sets=N resets=M pid=P"
 * so a test can check from outside, even after the process that set them died, that the clocks
 * were set and then reset. The counters count the calls made by this process. Setting clocks
 * fails with NVML_ERROR_NO_PERMISSION when $PRS_FAKE_NVML_DENY is set (a non-root user).
 *
 * The energy counter integrates the model's busy power at the locked clock over wall time
 * (CLOCK_MONOTONIC) since nvmlInit. No call allocates memory, so the functions are safe in a child
 * forked from a multi-threaded process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include "perseus/gpumodel.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef struct nvmlDevice_st *nvmlDevice_t;

#define EXPORT __attribute__((visibility("default")))

static const prs_gpu_preset *gpu;
static int init_count;
static unsigned locked_min, locked_max;
static long sets, resets;
static double energy_j, last_s;
static char device_token; /* the device handle points here */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double clock_in_effect(void)
{
    return locked_max ? (double)locked_max : (double)gpu->f_max_mhz;
}

static void advance(void)
{
    double t = now_s();
    energy_j += prs_gpu_power_w(gpu, clock_in_effect()) * (t - last_s);
    last_s = t;
}

static void write_state(void)
{
    const char *path = getenv("PRS_FAKE_NVML_STATE");
    if (!path || !*path) return;
    char tmp[1024], line[256];
    int n = snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (n <= 0 || (size_t)n >= sizeof tmp) return;
    if (locked_max)
        n = snprintf(line, sizeof line, "locked %u %u sets=%ld resets=%ld pid=%ld\n", locked_min,
                     locked_max, sets, resets, (long)getpid());
    else
        n = snprintf(line, sizeof line, "default sets=%ld resets=%ld pid=%ld\n", sets, resets,
                     (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    if (ok)
        rename(tmp, path);
    else
        unlink(tmp);
}

EXPORT int nvmlInit_v2(void)
{
    if (!gpu) {
        const char *name = getenv("PRS_FAKE_NVML_PRESET");
        gpu = prs_gpu_preset_find(name && *name ? name : "a100");
        if (!gpu) gpu = prs_gpu_preset_find("a100");
        last_s = now_s();
    }
    init_count++;
    return NVML_SUCCESS;
}

EXPORT int nvmlShutdown(void)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(int r)
{
    switch (r) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    default:
        return "Unknown Error";
    }
}

static int check_dev(nvmlDevice_t d)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    return d == (nvmlDevice_t)(void *)&device_token ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (index != 0 || !device) return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(void *)&device_token;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned length)
{
    int r = check_dev(d);
    if (r) return r;
    if (!name || length < 2) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "Fake NVML %s", gpu->name);
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned *count, unsigned *clocks)
{
    int r = check_dev(d);
    if (r) return r;
    static const unsigned mem[] = {1215, 405};
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < 2 || !clocks) {
        *count = 2;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(clocks, mem, sizeof mem);
    *count = 2;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned mem_mhz, unsigned *count,
                                                unsigned *clocks)
{
    int r = check_dev(d);
    if (r) return r;
    if (!count || (mem_mhz != 1215 && mem_mhz != 405)) return NVML_ERROR_INVALID_ARGUMENT;
    /* Like the real driver, the low memory clock allows only a few SM clocks. */
    unsigned n = mem_mhz == 1215 ? (unsigned)prs_gpu_num_clocks(gpu) : 2;
    if (*count < n || !clocks) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++)
        clocks[i] = (unsigned)prs_gpu_clock_at(
            gpu, mem_mhz == 1215 ? (int)i : prs_gpu_num_clocks(gpu) - 1 - (int)i);
    *count = n;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned min_mhz, unsigned max_mhz)
{
    int r = check_dev(d);
    if (r) return r;
    if (getenv("PRS_FAKE_NVML_DENY")) return NVML_ERROR_NO_PERMISSION;
    if (min_mhz > max_mhz || !prs_gpu_clock_supported(gpu, (int)min_mhz) ||
        !prs_gpu_clock_supported(gpu, (int)max_mhz))
        return NVML_ERROR_INVALID_ARGUMENT;
    advance();
    locked_min = min_mhz;
    locked_max = max_mhz;
    sets++;
    write_state();
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d)
{
    int r = check_dev(d);
    if (r) return r;
    if (getenv("PRS_FAKE_NVML_DENY")) return NVML_ERROR_NO_PERMISSION;
    advance();
    locked_min = locked_max = 0;
    resets++;
    write_state();
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy_mj)
{
    int r = check_dev(d);
    if (r) return r;
    if (!energy_mj) return NVML_ERROR_INVALID_ARGUMENT;
    advance();
    *energy_mj = (unsigned long long)(energy_j * 1000.0);
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *power_mw)
{
    int r = check_dev(d);
    if (r) return r;
    if (!power_mw) return NVML_ERROR_INVALID_ARGUMENT;
    *power_mw = (unsigned)(1000.0 * prs_gpu_power_w(gpu, clock_in_effect()));
    return NVML_SUCCESS;
}
