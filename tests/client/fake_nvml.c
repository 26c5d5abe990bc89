/* A fake libnvidia-ml.so.1 for the tests: the NVML calls the nvml backend uses (src/gpu/nvml.c)
 * and a few more (device count, UUIDs), implemented on the shared fake devices of fake_gpu.h (the
 * GPU model, preset $PRS_FAKE_NVML_PRESET or "a100"; $PRS_FAKE_NVML_DEVICES devices), so the real
 * dlopen path runs in CI without a GPU.
 *
 * Device selection: device i sits at PCI bus id "00000000:%02X:00.0" with bus 0x10 + i
 * (nvmlDeviceGetHandleByPciBusId_v2 takes any case and a 4- or 8-digit domain), and
 * nvmlDeviceGetMigMode says MIG mode is on (current and pending) for the indices listed in
 * $PRS_FAKE_NVML_MIG ("3,5"), off for the others. Every lock, reset, energy and power call is
 * counted per calling process on its device (fakegpu_touch), so a test sees who drove which GPU.
 *
 * The locked clocks are written to the file $PRS_FAKE_NVML_STATE (when set) after every change,
 * atomically (write a temporary file, rename), as one line:
 *   "locked MIN MAX sets=N resets=M pid=P"  or  "default sets=N resets=M pid=P"
 * so a test can check from outside, even after the process that set them died, that the clocks
 * were set and then reset. The counters count the calls made by this process. Setting clocks
 * fails with NVML_ERROR_NO_PERMISSION when $PRS_FAKE_NVML_DENY is set (a non-root user).
 * The line ends with the memory clock lock, " mem=MHZ" or " mem=default"
 * (nvmlDeviceSet/ResetMemoryLockedClocks, refused like the SM clock under $PRS_FAKE_NVML_DENY);
 * unlike the SM clock, the memory lock is this process's view only (not shared through the
 * device files). With $PRS_FAKE_NVML_IGNORE_LOCK=1, nvmlDeviceSetGpuLockedClocks returns success
 * but changes nothing, like GPUs (and vGPUs) that silently ignore it: only reading the clock back
 * (nvmlDeviceGetClockInfo: the locked clock in effect, else f_max) shows it.
 * With $PRS_FAKE_NVML_LOCK_LAG_READS=N, the first N reads of the SM clock after a lock (in the
 * process that locked) still give the clock from before it, as a real GPU's read-back right
 * after nvmlDeviceSetGpuLockedClocks may.
 * With $PRS_FAKE_NVML_DENY_BELOW=MHZ, locks below MHZ are NVML_ERROR_NOT_SUPPORTED although
 * listed (a driver or board that narrows the range it lets a user lock).
 * While the file named by $PRS_FAKE_NVML_FAIL_RESET exists, nvmlDeviceResetGpuLockedClocks
 * fails with NVML_ERROR_UNKNOWN and changes nothing, as on a GPU whose driver is wedged or that
 * fell off the bus; while the one named by $PRS_FAKE_NVML_FAIL_MEM_RESET exists, both memory
 * clock lock calls do. A test removes the file to heal it. With $PRS_FAKE_NVML_NO_MEM_LOCK=1 both
 * memory lock calls are NVML_ERROR_NOT_SUPPORTED, as on GPUs older than Ampere.
 * While the file named by $PRS_FAKE_NVML_SET_HOLD exists (at most 60 s),
 * nvmlDeviceSetGpuLockedClocks on device 0 does not return, as a driver call that takes long: a
 * test holds one GPU's clock change and sees what waits behind it. nvmlDeviceGetPciInfo_v3 gives
 * device index i the bus id "00000000:XX:00.0", XX = 0x10 + i.
 *
 * The energy counter and the power are the device's (fake_gpu.h): refreshed every
 * $PRS_FAKE_NVML_REFRESH_MS, with $PRS_FAKE_NVML_NOISE; with $PRS_FAKE_NVML_READ_MS an energy
 * read keeps the CPU busy that long (+-10 %), as an H100 does (about 3 ms; 100 ms refresh); with
 * $PRS_FAKE_NVML_NO_ENERGY=1 the energy counter is NVML_ERROR_NOT_SUPPORTED, as on GPUs older than
 * Volta. The first nvmlInit of a process starts a thread of the library's own, as the real one
 * does (with the caller's signal mask). A clock change takes effect at the instant of the call, in
 * every process sharing the device. Once a process has its device handles, no call allocates
 * memory, so the functions are safe in a child forked from a multi-threaded process. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_gpu.h"
#include "../rng.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_UNKNOWN 999

#define EXPORT __attribute__((visibility("default")))

/* A device handle points at one of these. */
typedef struct nvmlDevice_st {
    _Atomic(fakegpu_dev *) dev; /* NULL until first handed out; read by any thread */
} * nvmlDevice_t;

static struct nvmlDevice_st devices[FAKEGPU_MAX_DEVICES];
/* Set by nvmlInit under init_mu and read by every call, from any thread (a real NVML is
 * thread-safe): atomics. */
static _Atomic int init_count, device_count, no_energy;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER; /* nvmlInit from several threads */
static _Atomic double read_cost_s; /* $PRS_FAKE_NVML_READ_MS: mean cost of an energy read */
static char device_dir[512];       /* $PRS_FAKE_GPU_DIR of the devices */
static long sets, resets;          /* calls made by this process */

/* The memory clock lock of each device index in this process (0: default). */
static unsigned mem_locked[FAKEGPU_MAX_DEVICES];
static int lag_reads[FAKEGPU_MAX_DEVICES];    /* $PRS_FAKE_NVML_LOCK_LAG_READS left */
static unsigned lag_mhz[FAKEGPU_MAX_DEVICES]; /* the clock they give */

static int mem_state(const struct nvmlDevice_st *d, char *buf, size_t n);

static void write_state(nvmlDevice_t d)
{
    const char *path = getenv("PRS_FAKE_NVML_STATE");
    if (!path || !*path) return;
    char tmp[1024], line[256];
    int n = snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (n <= 0 || (size_t)n >= sizeof tmp) return;
    unsigned lo, hi;
    fakegpu_locked(d->dev, &lo, &hi);
    char mem[32];
    mem_state(d, mem, sizeof mem);
    if (hi)
        n = snprintf(line, sizeof line, "locked %u %u sets=%ld resets=%ld pid=%ld%s\n", lo, hi,
                     sets, resets, (long)getpid(), mem);
    else
        n = snprintf(line, sizeof line, "default sets=%ld resets=%ld pid=%ld%s\n", sets, resets,
                     (long)getpid(), mem);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    if (ok)
        rename(tmp, path);
    else
        unlink(tmp);
}

/* The real library starts threads of its own when first initialised, with the signal mask of
 * the thread that initialised it: a process-directed signal that the program's other threads
 * block can land on one of them. This one only waits. */
static void *library_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void start_once(void)
{
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_create(&th, &a, library_thread, NULL);
    pthread_attr_destroy(&a);
}

/* Once per process (a child forked after it has no thread, as with the real library). */
static void start_library_thread(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, start_once);
}

EXPORT int nvmlInit_v2(void)
{
    start_library_thread();
    /* A first initialisation, or one under another $PRS_FAKE_GPU_DIR, takes the devices of the
     * current environment. */
    const char *dir = getenv("PRS_FAKE_GPU_DIR");
    if (!dir) dir = "";
    pthread_mutex_lock(&init_mu);
    if (init_count == 0 || strcmp(dir, device_dir) != 0) {
        snprintf(device_dir, sizeof device_dir, "%s", dir);
        device_count = fakegpu_count();
        for (int i = 0; i < FAKEGPU_MAX_DEVICES; i++)
            devices[i].dev = NULL;
        const char *ne = getenv("PRS_FAKE_NVML_NO_ENERGY");
        no_energy = ne && *ne && strcmp(ne, "0") != 0;
        const char *rc = getenv("PRS_FAKE_NVML_READ_MS");
        double ms = rc ? strtod(rc, NULL) : 0;
        read_cost_s = ms > 0 && ms < 1000 ? 1e-3 * ms : 0;
    }
    init_count++;
    pthread_mutex_unlock(&init_mu);
    return NVML_SUCCESS;
}

EXPORT int nvmlInit(void)
{
    return nvmlInit_v2();
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
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    default:
        return "Unknown Error";
    }
}

/* The handle of device index, mapping its state on first use. */
static int handle_at(unsigned index, nvmlDevice_t *out)
{
    if (index >= (unsigned)device_count) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlDevice_t d = &devices[index];
    pthread_mutex_lock(&init_mu);
    int ok = d->dev || (d->dev = fakegpu_open((int)index));
    pthread_mutex_unlock(&init_mu);
    if (!ok) return NVML_ERROR_UNKNOWN;
    *out = d;
    return NVML_SUCCESS;
}

static int check_dev(nvmlDevice_t d)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (d < devices || d >= devices + device_count || !d->dev) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned *count)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)device_count;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device) return NVML_ERROR_INVALID_ARGUMENT;
    return handle_at(index, device);
}

EXPORT int nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned length)
{
    int r = check_dev(d);
    if (r) return r;
    if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 41) return NVML_ERROR_INSUFFICIENT_SIZE;
    fakegpu_uuid_str(d->dev, uuid, length);
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < device_count; i++) {
        nvmlDevice_t d;
        int r = handle_at((unsigned)i, &d);
        if (r) return r;
        char s[64];
        fakegpu_uuid_str(d->dev, s, sizeof s);
        if (strcmp(s, uuid) == 0) {
            *device = d;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* 1 when s is a fake device's PCI bus id ("%x:%x:%x.%x", domain 0, bus 0x10 + i, device 0,
 * function 0), with i in *index. */
static int parse_bus_id(const char *s, int *index)
{
    unsigned dom, bus, dev, fn;
    int used = 0;
    if (sscanf(s, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &used) != 4 || s[used] != '\0') return 0;
    if (dom != 0 || dev != 0 || fn != 0 || bus < 0x10) return 0;
    *index = (int)bus - 0x10;
    return 1;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
    if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
    int index;
    if (!parse_bus_id(bus_id, &index) || index >= device_count) return NVML_ERROR_NOT_FOUND;
    return handle_at((unsigned)index, device);
}

/* MIG mode: on for the indices listed in $PRS_FAKE_NVML_MIG. */
EXPORT int nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending)
{
    int r = check_dev(d);
    if (r) return r;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    const char *v = getenv("PRS_FAKE_NVML_MIG");
    int on = 0, index = fakegpu_index(d->dev);
    while (v && *v && !on) {
        char *end;
        long i = strtol(v, &end, 10);
        on = end != v && i == index;
        v = *end == ',' ? end + 1 : NULL;
    }
    *current = *pending = (unsigned)on;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned length)
{
    int r = check_dev(d);
    if (r) return r;
    if (!name || length < 2) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "Fake NVML %s", fakegpu_preset(d->dev)->name);
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
    const prs_gpu_preset *gpu = fakegpu_preset(d->dev);
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

/* $PRS_FAKE_NVML_SET_HOLD: device 0's lock waits while the file exists, 60 s at most. */
static void set_hold(nvmlDevice_t d)
{
    const char *hold = getenv("PRS_FAKE_NVML_SET_HOLD");
    if (!hold || !*hold || d != &devices[0]) return;
    for (int ms = 0; ms < 60000 && access(hold, F_OK) == 0; ms++) {
        struct timespec one = {0, 1000000L};
        nanosleep(&one, NULL); /* polls the file */
    }
}

EXPORT int nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned min_mhz, unsigned max_mhz)
{
    int r = check_dev(d);
    if (r) return r;
    set_hold(d);
    if (getenv("PRS_FAKE_NVML_DENY")) return NVML_ERROR_NO_PERMISSION;
    const prs_gpu_preset *gpu = fakegpu_preset(d->dev);
    if (min_mhz > max_mhz || !prs_gpu_clock_supported(gpu, (int)min_mhz) ||
        !prs_gpu_clock_supported(gpu, (int)max_mhz))
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *below = getenv("PRS_FAKE_NVML_DENY_BELOW");
    if (below && *below && min_mhz < (unsigned)atoi(below)) return NVML_ERROR_NOT_SUPPORTED;
    const char *ignore = getenv("PRS_FAKE_NVML_IGNORE_LOCK");
    if (ignore && *ignore && strcmp(ignore, "0") != 0) return NVML_SUCCESS;
    const char *lag = getenv("PRS_FAKE_NVML_LOCK_LAG_READS");
    if (lag && atoi(lag) > 0) {
        lag_reads[d - devices] = atoi(lag);
        lag_mhz[d - devices] = (unsigned)fakegpu_clock_mhz(d->dev);
    }
    fakegpu_set_locked(d->dev, min_mhz, max_mhz);
    fakegpu_touch(d->dev, FAKEGPU_LOCK);
    sets++;
    write_state(d);
    return NVML_SUCCESS;
}

/* The file named by $var exists (a reset that fails while it does). */
static int failing(const char *var)
{
    const char *f = getenv(var);
    return f && *f && access(f, F_OK) == 0;
}

EXPORT int nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d)
{
    int r = check_dev(d);
    if (r) return r;
    if (getenv("PRS_FAKE_NVML_DENY")) return NVML_ERROR_NO_PERMISSION;
    if (failing("PRS_FAKE_NVML_FAIL_RESET")) return NVML_ERROR_UNKNOWN;
    fakegpu_set_locked(d->dev, 0, 0);
    fakegpu_touch(d->dev, FAKEGPU_RESET);
    resets++;
    write_state(d);
    return NVML_SUCCESS;
}

/* Uniform in [0, 1) from a per-thread splitmix64 stream. */
static double unif(void)
{
    static _Thread_local uint64_t x;
    if (!x) x = (uint64_t)(fakegpu_now_s() * 1e9) ^ (uint64_t)(uintptr_t)&x;
    return prs_test_rng_unif(&x);
}

static void spin_until(double t)
{
    while (fakegpu_now_s() < t) {
    }
}

/* The counter read as an H100's driver reads it (docs/measurement.md, docs/gpu-check-h100.md):
 * the call keeps the CPU busy for about read_cost_s (0.9 to 1.1 times it) and returns the value
 * the counter had half the nominal cost after the call began, so a read's middle is near, not at,
 * the instant of its value. An H100's reads also have a tail (p90 1.9 times the median, the
 * slowest 6 times it): one read in ten here lasts 1.8 to 2.6 times the cost, one in two hundred
 * 6 times, the value still taken half the nominal cost in. */
static _Atomic long stretched_reads, slow_reads;

static double read_cost_drawn(void)
{
    double u = unif(), cost = read_cost_s * (0.9 + 0.2 * unif());
    if (u >= 0.1) return cost;
    atomic_fetch_add(&slow_reads, 1);
    return u < 0.005 ? 6.0 * read_cost_s : read_cost_s * (1.8 + 0.8 * unif());
}

/* Test-only: the reads of this process drawn from the tail. */
EXPORT long fakenvml_slow_reads(void)
{
    return atomic_load(&slow_reads);
}

static double costly_read(fakegpu_dev *dev)
{
    if (!(read_cost_s > 0)) return fakegpu_energy_j(dev);
    double t0 = fakegpu_now_s(), cost = read_cost_drawn();
    spin_until(t0 + 0.5 * read_cost_s);
    double e = fakegpu_energy_j(dev);
    spin_until(t0 + cost);
    /* Preempted (a busy machine): the value is no longer from the read's middle. */
    if (fakegpu_now_s() > t0 + cost + 0.1 * read_cost_s) atomic_fetch_add(&stretched_reads, 1);
    return e;
}

/* Test-only: the costly reads of this process that the scheduler stretched (they lasted over a
 * tenth of the nominal cost longer than drawn), whose value is then not from their middle: a
 * test of what a reader infers from the reads' timing allows for them. */
EXPORT long fakenvml_stretched_reads(void)
{
    return atomic_load(&stretched_reads);
}

EXPORT int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy_mj)
{
    int r = check_dev(d);
    if (r) return r;
    if (no_energy) return NVML_ERROR_NOT_SUPPORTED;
    if (!energy_mj) return NVML_ERROR_INVALID_ARGUMENT;
    fakegpu_touch(d->dev, FAKEGPU_ENERGY);
    *energy_mj = (unsigned long long)(costly_read(d->dev) * 1000.0);
    return NVML_SUCCESS;
}

/* GA100 (preset a100) and older report the power now; newer GPUs an average over the last second,
 * refreshed with the energy counter (an H100 measured so: docs/gpu-check-h100.md). */
static int power_averaged(nvmlDevice_t d)
{
    return strcmp(fakegpu_preset(d->dev)->name, "a100") != 0;
}

EXPORT int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *power_mw)
{
    int r = check_dev(d);
    if (r) return r;
    if (!power_mw) return NVML_ERROR_INVALID_ARGUMENT;
    fakegpu_touch(d->dev, FAKEGPU_POWER);
    double w = power_averaged(d) ? fakegpu_power_avg_w(d->dev, 1.0) : fakegpu_power_w(d->dev);
    *power_mw = (unsigned)(1000.0 * w);
    return NVML_SUCCESS;
}

/* nvmlFieldValue_t, and the fields answered: the power now (NVML_FI_DEV_POWER_INSTANT, as an
 * unsigned int of milliwatts); any other field is NVML_ERROR_NOT_SUPPORTED in its own slot. */
typedef struct nvmlFieldValue_st {
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType, nvmlReturn;
    union {
        double dVal;
        unsigned uiVal;
        unsigned long ulVal;
        unsigned long long ullVal;
        long long sllVal;
        int siVal;
        unsigned short usVal;
    } value;
} nvmlFieldValue_t;
#define NVML_FI_DEV_POWER_INSTANT 186
#define NVML_VALUE_TYPE_UNSIGNED_INT 1

EXPORT int nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values)
{
    int r = check_dev(d);
    if (r) return r;
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        v->timestamp = (long long)(1e6 * fakegpu_now_s());
        v->latencyUsec = 0;
        if (v->fieldId != NVML_FI_DEV_POWER_INSTANT) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        fakegpu_touch(d->dev, FAKEGPU_POWER);
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.uiVal = (unsigned)(1000.0 * fakegpu_power_w(d->dev));
        v->nvmlReturn = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
}

/* The board's power limit: $PRS_FAKE_NVML_POWER_LIMIT_W when set (enforced), else the preset's
 * (not enforced: the presets' busy power at f_max may exceed it). */
EXPORT int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *limit_mw)
{
    int r = check_dev(d);
    if (r) return r;
    if (!limit_mw) return NVML_ERROR_INVALID_ARGUMENT;
    double w = fakegpu_power_limit_w(d->dev);
    *limit_mw = (unsigned)(1000.0 * (w > 0 ? w : fakegpu_preset(d->dev)->tdp_w));
    return NVML_SUCCESS;
}

/* ---- read-back, PCI identity and memory clock locks ---- */

#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define FAKE_MEM_MAX_MHZ 1215

/* nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3). */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

static int mem_state(const struct nvmlDevice_st *d, char *buf, size_t n)
{
    unsigned m = mem_locked[d - devices];
    return m ? snprintf(buf, n, " mem=%u", m) : snprintf(buf, n, " mem=default");
}

EXPORT int nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *clock)
{
    int r = check_dev(d);
    if (r) return r;
    if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
    if ((type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS) && lag_reads[d - devices] > 0) {
        lag_reads[d - devices]--;
        *clock = lag_mhz[d - devices];
    } else if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS)
        *clock = (unsigned)fakegpu_clock_mhz(d->dev);
    else if (type == NVML_CLOCK_MEM)
        *clock = mem_locked[d - devices] ? mem_locked[d - devices] : FAKE_MEM_MAX_MHZ;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    int r = check_dev(d);
    if (r) return r;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    unsigned index = (unsigned)(d - devices);
    pci->bus = 0x10 + index;
    pci->pciDeviceId = 0x20b010de;
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned min_mhz, unsigned max_mhz)
{
    int r = check_dev(d);
    if (r) return r;
    if (getenv("PRS_FAKE_NVML_DENY")) return NVML_ERROR_NO_PERMISSION;
    if (getenv("PRS_FAKE_NVML_NO_MEM_LOCK")) return NVML_ERROR_NOT_SUPPORTED;
    if (failing("PRS_FAKE_NVML_FAIL_MEM_RESET")) return NVML_ERROR_UNKNOWN;
    if (min_mhz > max_mhz || (max_mhz != FAKE_MEM_MAX_MHZ && max_mhz != 405) ||
        (min_mhz != FAKE_MEM_MAX_MHZ && min_mhz != 405))
        return NVML_ERROR_INVALID_ARGUMENT;
    mem_locked[d - devices] = max_mhz;
    write_state(d);
    return NVML_SUCCESS;
}

EXPORT int nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d)
{
    int r = check_dev(d);
    if (r) return r;
    if (getenv("PRS_FAKE_NVML_DENY")) return NVML_ERROR_NO_PERMISSION;
    if (getenv("PRS_FAKE_NVML_NO_MEM_LOCK")) return NVML_ERROR_NOT_SUPPORTED;
    if (failing("PRS_FAKE_NVML_FAIL_MEM_RESET")) return NVML_ERROR_UNKNOWN;
    mem_locked[d - devices] = 0;
    write_state(d);
    return NVML_SUCCESS;
}
