/* The nvml GPU backend: NVIDIA's management library loaded at run time.
 *
 * We dlopen("libnvidia-ml.so.1") (or a path the caller gives: tests load a fake one built on the
 * GPU model) and resolve the dozen functions we use with dlsym, against our own declarations of
 * their C signatures (gpu_int.h): the build needs no NVIDIA header and the program runs on hosts
 * without a driver, failing cleanly (PRS_ENOLIB and a message naming the library or symbol).
 * The versioned entry points (nvmlInit_v2, nvmlDeviceGetHandleByIndex_v2) are the ones the
 * driver's nvml.h maps the plain names to.
 *
 * Locking the SM clock is nvmlDeviceSetGpuLockedClocks(min = max = f) (Volta and newer, root);
 * nvmlDeviceResetGpuLockedClocks undoes it. The supported SM clocks are those listed for the
 * highest memory clock. Energy is the driver's cumulative counter in millijoules.
 *
 * Optional symbols (the field stays NULL without them): nvmlDeviceGetHandleByPciBusId_v2 (for
 * nvml:pci=...), nvmlDeviceGetMigMode (older drivers lack it: not in MIG mode), and
 * nvmlDeviceGetCount_v2 with nvmlDeviceGetUUID (listing the node's GPUs, to resolve
 * CUDA_VISIBLE_DEVICES without the CUDA driver). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_int.h"

#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7

static const char *nvml_err(prs_gpu *g, prs__gpu_nvml_return r)
{
    const char *s = g->nvml.error_string ? g->nvml.error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

static int nvml_fail(prs_gpu *g, const char *call, prs__gpu_nvml_return r)
{
    return prs__gpu_fail(g, PRS_EGPU, "NVML %s: %s (%d)", call, nvml_err(g, r), r);
}

/* dlsym into a function pointer without the object-to-function pointer cast warning. */
static int resolve(prs_gpu *g, void *fnptr, size_t size, const char *sym, prs_error *err)
{
    void *p = dlsym(g->nvml.lib, sym);
    if (!p) {
        prs_error_set(err, PRS_ENOLIB, "NVML library lacks symbol %s (driver too old?)", sym);
        return PRS_ENOLIB; /* as prs_error_set returns: visibly non-zero to analysis */
    }
    memcpy(fnptr, &p, size);
    return 0;
}

/* The symbols older drivers may lack: NULL when missing (the calls needing them say so). */
#define RESOLVE(field, sym)                                                                        \
    do {                                                                                           \
        int rc_ = resolve(g, &g->nvml.field, sizeof g->nvml.field, sym, err);                      \
        if (rc_) {                                                                                 \
            dlclose(g->nvml.lib);                                                                  \
            memset(&g->nvml, 0, sizeof g->nvml);                                                   \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)

/* An optional symbol: the field stays NULL when the driver lacks it. */
static void resolve_opt(prs_gpu *g, void *fnptr, size_t size, const char *sym)
{
    void *p = dlsym(g->nvml.lib, sym);
    if (p) memcpy(fnptr, &p, size);
}

/* The device handle: by PCI bus id or by UUID when set (a CUDA device's, so ranks that see their
 * GPU through CUDA_VISIBLE_DEVICES find the same physical GPU in NVML), else by index. */
static prs__gpu_nvml_return device_handle(prs_gpu *g, const char **call)
{
    if (g->pci[0]) {
        *call = "nvmlDeviceGetHandleByPciBusId_v2";
        return g->nvml.handle_by_pci(g->pci, &g->dev);
    }
    *call = g->uuid[0] ? "nvmlDeviceGetHandleByUUID" : "nvmlDeviceGetHandleByIndex_v2";
    return g->uuid[0] ? g->nvml.handle_by_uuid(g->uuid, &g->dev)
                      : g->nvml.handle_by_index(g->index, &g->dev);
}

static void unload(prs_gpu *g, int shutdown)
{
    if (shutdown) g->nvml.shutdown();
    dlclose(g->nvml.lib);
    memset(&g->nvml, 0, sizeof g->nvml);
}

/* dlopen the library, resolve the symbols, nvmlInit_v2. */
static int nvml_load(prs_gpu *g, const char *lib_path, prs_error *err)
{
    if (!lib_path || !*lib_path) lib_path = getenv("PRS_NVML_LIBRARY");
    if (!lib_path || !*lib_path) lib_path = "libnvidia-ml.so.1";
    snprintf(g->lib_path, sizeof g->lib_path, "%s", lib_path);
    g->nvml.lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!g->nvml.lib) {
        const char *why = dlerror();
        prs_error_set(err, PRS_ENOLIB,
                      "cannot load the NVIDIA management library %s: %s (is the NVIDIA "
                      "driver installed? use the sim backend otherwise)",
                      lib_path, why ? why : "unknown reason");
        return PRS_ENOLIB; /* as prs_error_set returns: visibly non-zero to analysis */
    }
    RESOLVE(init, "nvmlInit_v2");
    RESOLVE(shutdown, "nvmlShutdown");
    RESOLVE(error_string, "nvmlErrorString");
    RESOLVE(handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
    RESOLVE(handle_by_uuid, "nvmlDeviceGetHandleByUUID");
    RESOLVE(get_name, "nvmlDeviceGetName");
    RESOLVE(mem_clocks, "nvmlDeviceGetSupportedMemoryClocks");
    RESOLVE(gr_clocks, "nvmlDeviceGetSupportedGraphicsClocks");
    RESOLVE(set_locked, "nvmlDeviceSetGpuLockedClocks");
    RESOLVE(reset_locked, "nvmlDeviceResetGpuLockedClocks");
    RESOLVE(energy, "nvmlDeviceGetTotalEnergyConsumption");
    RESOLVE(power, "nvmlDeviceGetPowerUsage");
    resolve_opt(g, &g->nvml.handle_by_pci, sizeof g->nvml.handle_by_pci,
                "nvmlDeviceGetHandleByPciBusId_v2");
    resolve_opt(g, &g->nvml.mig_mode, sizeof g->nvml.mig_mode, "nvmlDeviceGetMigMode");
    resolve_opt(g, &g->nvml.count, sizeof g->nvml.count, "nvmlDeviceGetCount_v2");
    resolve_opt(g, &g->nvml.field_values, sizeof g->nvml.field_values, "nvmlDeviceGetFieldValues");
    resolve_opt(g, &g->nvml.get_uuid, sizeof g->nvml.get_uuid, "nvmlDeviceGetUUID");
    resolve_opt(g, &g->nvml.pci_info, sizeof g->nvml.pci_info, "nvmlDeviceGetPciInfo_v3");
    resolve_opt(g, &g->nvml.clock_info, sizeof g->nvml.clock_info, "nvmlDeviceGetClockInfo");
    resolve_opt(g, &g->nvml.set_mem_locked, sizeof g->nvml.set_mem_locked,
                "nvmlDeviceSetMemoryLockedClocks");
    resolve_opt(g, &g->nvml.reset_mem_locked, sizeof g->nvml.reset_mem_locked,
                "nvmlDeviceResetMemoryLockedClocks");
    prs__gpu_nvml_return r = g->nvml.init();
    if (r != NVML_SUCCESS) {
        prs_error_set(err, PRS_EGPU, "NVML nvmlInit_v2: %s (%d)", nvml_err(g, r), r);
        unload(g, 0);
        return PRS_EGPU;
    }
    return 0;
}

/* A GPU in MIG mode is refused (its locked clocks are the whole GPU's). Drivers without
 * nvmlDeviceGetMigMode, and GPUs that do not support MIG, are not in MIG mode. */
static int refuse_mig(prs_gpu *g, prs_error *err)
{
    unsigned current = 0, pending = 0;
    if (!g->nvml.mig_mode || g->nvml.mig_mode(g->dev, &current, &pending) != NVML_SUCCESS ||
        current != 1)
        return 0;
    char what[160];
    snprintf(what, sizeof what, "GPU %.96s (%.40s)",
             g->pci[0]    ? g->pci
             : g->uuid[0] ? g->uuid
                          : "by index",
             g->name);
    return prs__gpu_mig_refusal(err, what);
}

int prs__gpu_nvml_open(prs_gpu *g, unsigned index, const char *uuid, const char *lib_path,
                       prs_error *err)
{
    if (uuid && strlen(uuid) >= sizeof g->uuid)
        return prs_error_set(err, PRS_EINVAL, "GPU UUID '%.40s...' is too long", uuid);
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid ? uuid : "");
    g->index = index;
    int rc = nvml_load(g, lib_path, err);
    if (rc) return rc;
    if (g->pci[0] && !g->nvml.handle_by_pci) {
        unload(g, 1);
        return prs_error_set(err, PRS_ENOLIB,
                             "NVML library lacks symbol nvmlDeviceGetHandleByPciBusId_v2 (driver "
                             "too old? select the GPU by UUID or index)");
    }
    const char *call;
    prs__gpu_nvml_return r = device_handle(g, &call);
    if (r != NVML_SUCCESS) {
        char which[32];
        snprintf(which, sizeof which, "%u", index);
        prs_error_set(err, PRS_EGPU, "NVML %s(%s): %s (%d)", call,
                      g->pci[0]    ? g->pci
                      : g->uuid[0] ? g->uuid
                                   : which,
                      nvml_err(g, r), r);
        unload(g, 1);
        return PRS_EGPU;
    }
    if (g->nvml.get_name(g->dev, g->name, sizeof g->name) != NVML_SUCCESS)
        snprintf(g->name, sizeof g->name, "NVIDIA GPU %u", index);
    g->name[sizeof g->name - 1] = '\0';
    if ((rc = refuse_mig(g, err)) != 0) unload(g, 1);
    return rc;
}

/* Fill uuids from a loaded library. */
static int list_uuids(prs_gpu *g, char (*uuids)[PRS__GPU_UUID_LEN], int cap, int *n, prs_error *err)
{
    unsigned count = 0;
    prs__gpu_nvml_return r = g->nvml.count(&count);
    if (r != NVML_SUCCESS)
        return prs_error_set(err, PRS_EGPU, "NVML nvmlDeviceGetCount_v2: %s (%d)", nvml_err(g, r),
                             r);
    *n = (int)count;
    for (unsigned i = 0; i < count && (int)i < cap; i++) {
        prs__gpu_nvml_device d;
        r = g->nvml.handle_by_index(i, &d);
        if (r == NVML_SUCCESS) r = g->nvml.get_uuid(d, uuids[i], PRS__GPU_UUID_LEN);
        if (r != NVML_SUCCESS)
            return prs_error_set(err, PRS_EGPU, "NVML UUID of GPU %u: %s (%d)", i, nvml_err(g, r),
                                 r);
        uuids[i][PRS__GPU_UUID_LEN - 1] = '\0';
    }
    return 0;
}

int prs__gpu_nvml_uuids(const char *lib_path, char (*uuids)[PRS__GPU_UUID_LEN], int cap, int *n,
                        prs_error *err)
{
    *n = 0;
    prs_gpu *g = calloc(1, sizeof *g);
    if (!g) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = nvml_load(g, lib_path, err);
    if (!rc && (!g->nvml.count || !g->nvml.get_uuid)) {
        prs_error_set(err, PRS_ENOLIB,
                      "NVML library lacks nvmlDeviceGetCount_v2 or "
                      "nvmlDeviceGetUUID (driver too old?)");
        rc = PRS_ENOLIB; /* as prs_error_set returns: visibly non-zero to analysis */
    }
    if (!rc) rc = list_uuids(g, uuids, cap, n, err);
    if (g->nvml.lib) unload(g, 1);
    free(g);
    return rc;
}

void prs__gpu_nvml_close(prs_gpu *g)
{
    if (g->nvml.lib) unload(g, 1);
}

static int cmp_desc(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Fill a malloc'd list through a size-probing NVML call (count in, count out). */
static int nvml_list(prs_gpu *g, const char *call, unsigned mem_mhz, int graphics, unsigned **out,
                     unsigned *count)
{
    unsigned cap = 64;
    for (int tries = 0; tries < 4; tries++) {
        unsigned *buf = malloc(sizeof *buf * cap);
        if (!buf) return prs__gpu_fail(g, PRS_ENOMEM, "out of memory");
        unsigned n = cap;
        prs__gpu_nvml_return r = graphics ? g->nvml.gr_clocks(g->dev, mem_mhz, &n, buf)
                                          : g->nvml.mem_clocks(g->dev, &n, buf);
        if (r == NVML_SUCCESS) {
            *out = buf;
            *count = n < cap ? n : cap;
            return 0;
        }
        free(buf);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE) return nvml_fail(g, call, r);
        cap = n > cap ? n : cap * 4;
    }
    return prs__gpu_fail(g, PRS_EGPU, "NVML %s: list keeps growing", call);
}

int prs__gpu_nvml_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n)
{
    unsigned *mem = NULL, nmem = 0, *gr = NULL, ngr = 0;
    int rc = nvml_list(g, "nvmlDeviceGetSupportedMemoryClocks", 0, 0, &mem, &nmem);
    if (rc) return rc;
    if (nmem == 0) {
        free(mem);
        return prs__gpu_fail(g, PRS_EGPU, "NVML lists no memory clock");
    }
    qsort(mem, nmem, sizeof *mem, cmp_desc);
    rc = nvml_list(g, "nvmlDeviceGetSupportedGraphicsClocks", mem[0], 1, &gr, &ngr);
    free(mem);
    if (rc) return rc;
    if (ngr == 0 || !gr) {
        free(gr);
        return prs__gpu_fail(g, PRS_EGPU, "NVML lists no SM clock");
    }
    qsort(gr, ngr, sizeof *gr, cmp_desc);
    *n = (int)ngr;
    for (int i = 0; i < (int)ngr && i < cap; i++)
        clocks_mhz[i] = (int)gr[i];
    free(gr);
    return 0;
}

int prs__gpu_nvml_set_clock(prs_gpu *g, int freq_mhz)
{
    if (freq_mhz <= 0) return prs__gpu_fail(g, PRS_EINVAL, "clock must be > 0 MHz");
    prs__gpu_nvml_return r = g->nvml.set_locked(g->dev, (unsigned)freq_mhz, (unsigned)freq_mhz);
    return r == NVML_SUCCESS ? 0 : nvml_fail(g, "nvmlDeviceSetGpuLockedClocks", r);
}

int prs__gpu_nvml_reset_clock(prs_gpu *g)
{
    prs__gpu_nvml_return r = g->nvml.reset_locked(g->dev);
    return r == NVML_SUCCESS ? 0 : nvml_fail(g, "nvmlDeviceResetGpuLockedClocks", r);
}

int prs__gpu_nvml_energy_mj(prs_gpu *g, uint64_t *energy_mj)
{
    unsigned long long e = 0;
    prs__gpu_nvml_return r = g->nvml.energy(g->dev, &e);
    if (r != NVML_SUCCESS) return nvml_fail(g, "nvmlDeviceGetTotalEnergyConsumption", r);
    *energy_mj = (uint64_t)e;
    return 0;
}

/* The instantaneous power field: 0 with *power_mw set, -1 when the driver lacks or refuses it
 * (then never asked again). */
static int instant_power_mw(prs_gpu *g, unsigned *power_mw)
{
    if (!g->nvml.field_values || g->no_instant_power) return -1;
    prs__gpu_nvml_field f;
    memset(&f, 0, sizeof f);
    f.field_id = PRS__NVML_FI_DEV_POWER_INSTANT;
    double mw = -1;
    if (g->nvml.field_values(g->dev, 1, &f) == NVML_SUCCESS && f.nvml_return == NVML_SUCCESS) {
        switch (f.value_type) {
        case 0:
            mw = f.value.d;
            break;
        case 1:
            mw = f.value.ui;
            break;
        case 2:
            mw = (double)f.value.ul;
            break;
        case 3:
            mw = (double)f.value.ull;
            break;
        case 4:
            mw = (double)f.value.sll;
            break;
        case 5:
            mw = f.value.si;
            break;
        default:
            break;
        }
    }
    if (!(mw >= 0 && mw < 1e8)) {
        g->no_instant_power = 1;
        return -1;
    }
    *power_mw = (unsigned)mw;
    return 0;
}

/* The power now. nvmlDeviceGetPowerUsage returns it on GA100 and older GPUs, but an average over
 * the last second on newer ones (the H100 measured so: docs/gpu-check-h100.md), so the
 * instantaneous field is asked first. */
int prs__gpu_nvml_power_mw(prs_gpu *g, unsigned *power_mw)
{
    if (instant_power_mw(g, power_mw) == 0) return 0;
    prs__gpu_nvml_return r = g->nvml.power(g->dev, power_mw);
    return r == NVML_SUCCESS ? 0 : nvml_fail(g, "nvmlDeviceGetPowerUsage", r);
}

/* ---- identity, read-back, memory clocks (perseus-gpud) ---- */

#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2

/* nvmlPciInfo_t as of nvmlDeviceGetPciInfo_v3: the legacy 16-byte bus id, five unsigned fields
 * (domain, bus, device, PCI device id, subsystem id), then the 32-byte bus id. */
typedef struct nvml_pci_info {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info;

static int not_supported(prs_gpu *g, const char *sym)
{
    return prs__gpu_fail(g, PRS_EGPU, "NVML %s: not supported by this driver (symbol missing)",
                         sym);
}

int prs__gpu_nvml_uuid(prs_gpu *g, char *buf, size_t n)
{
    if (!g->nvml.get_uuid) return not_supported(g, "nvmlDeviceGetUUID");
    char tmp[96];
    prs__gpu_nvml_return r = g->nvml.get_uuid(g->dev, tmp, sizeof tmp);
    if (r != NVML_SUCCESS) return nvml_fail(g, "nvmlDeviceGetUUID", r);
    tmp[sizeof tmp - 1] = '\0';
    if (strlen(tmp) >= n) return prs__gpu_fail(g, PRS_EINVAL, "UUID buffer too small");
    memcpy(buf, tmp, strlen(tmp) + 1);
    return 0;
}

int prs__gpu_nvml_pci_bus_id(prs_gpu *g, char *buf, size_t n)
{
    if (!g->nvml.pci_info) return not_supported(g, "nvmlDeviceGetPciInfo_v3");
    nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    prs__gpu_nvml_return r = g->nvml.pci_info(g->dev, &pci);
    if (r != NVML_SUCCESS) return nvml_fail(g, "nvmlDeviceGetPciInfo_v3", r);
    pci.bus_id[sizeof pci.bus_id - 1] = '\0';
    if (strlen(pci.bus_id) >= n) return prs__gpu_fail(g, PRS_EINVAL, "PCI bus id buffer too small");
    memcpy(buf, pci.bus_id, strlen(pci.bus_id) + 1);
    return 0;
}

int prs__gpu_nvml_sm_clock_now(prs_gpu *g, int *mhz)
{
    if (!g->nvml.clock_info) return not_supported(g, "nvmlDeviceGetClockInfo");
    unsigned f = 0;
    prs__gpu_nvml_return r = g->nvml.clock_info(g->dev, NVML_CLOCK_SM, &f);
    if (r != NVML_SUCCESS) return nvml_fail(g, "nvmlDeviceGetClockInfo", r);
    *mhz = (int)f;
    return 0;
}

int prs__gpu_nvml_lock_memory_max(prs_gpu *g)
{
    if (!g->nvml.set_mem_locked) return not_supported(g, "nvmlDeviceSetMemoryLockedClocks");
    unsigned *mem = NULL, nmem = 0;
    int rc = nvml_list(g, "nvmlDeviceGetSupportedMemoryClocks", 0, 0, &mem, &nmem);
    if (rc) return rc;
    unsigned top = 0;
    for (unsigned i = 0; i < nmem; i++)
        if (mem[i] > top) top = mem[i];
    free(mem);
    if (top == 0) return prs__gpu_fail(g, PRS_EGPU, "NVML lists no memory clock");
    prs__gpu_nvml_return r = g->nvml.set_mem_locked(g->dev, top, top);
    return r == NVML_SUCCESS ? 0 : nvml_fail(g, "nvmlDeviceSetMemoryLockedClocks", r);
}

/* A driver or GPU without memory clock locks (the symbol missing, or NVML_ERROR_NOT_SUPPORTED:
 * before Ampere) has none to undo: 0. */
int prs__gpu_nvml_reset_memory_clock(prs_gpu *g)
{
    if (!g->nvml.reset_mem_locked) return 0;
    prs__gpu_nvml_return r = g->nvml.reset_mem_locked(g->dev);
    return r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED
               ? 0
               : nvml_fail(g, "nvmlDeviceResetMemoryLockedClocks", r);
}

/* The device count, through a library handle of its own (nvml_load, unloaded here). */
int prs_gpu_nvml_count(const char *lib_path, unsigned *n, prs_error *err)
{
    prs_gpu *g = calloc(1, sizeof *g);
    if (!g) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = nvml_load(g, lib_path, err);
    if (!rc && !g->nvml.count) {
        prs_error_set(err, PRS_ENOLIB,
                      "NVML library %s lacks nvmlDeviceGetCount_v2 (driver too old?)", g->lib_path);
        rc = PRS_ENOLIB;
    }
    if (!rc) {
        unsigned c = 0;
        prs__gpu_nvml_return r = g->nvml.count(&c);
        if (r != NVML_SUCCESS) {
            prs_error_set(err, PRS_EGPU, "NVML nvmlDeviceGetCount_v2: %s (%d)", nvml_err(g, r), r);
            rc = PRS_EGPU;
        } else {
            *n = c;
        }
    }
    if (g->nvml.lib) unload(g, 1);
    free(g);
    return rc;
}

int prs__gpu_open_nvml_dev(unsigned index, const char *uuid, const char *pci, const char *lib_path,
                           prs_gpu **out, prs_error *err)
{
    *out = NULL;
    if (pci && strlen(pci) >= sizeof((prs_gpu *)0)->pci)
        return prs_error_set(err, PRS_EINVAL, "PCI bus id '%.40s' is too long", pci);
    prs_gpu *g = calloc(1, sizeof *g);
    if (!g) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    if (pci) snprintf(g->pci, sizeof g->pci, "%s", pci);
    int rc = prs__gpu_nvml_open(g, index, uuid, lib_path, err);
    if (rc) {
        free(g);
        return rc;
    }
    *out = g;
    return 0;
}
