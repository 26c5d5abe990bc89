/* Internal to the GPU backends (src/gpu): the handle, the backend table, and helpers shared by
 * gpu.c (dispatch), sim.c, nvml.c and clockctl.c. */
#ifndef PRS_GPU_INT_H
#define PRS_GPU_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "perseus/gpu.h"
#include "perseus/limits.h" /* PRS_MAX_GPU_INDEX */

/* Opaque NVML types, declared here instead of NVIDIA's nvml.h (same ABI: an int result, a
 * pointer-sized device handle). */
typedef int prs__gpu_nvml_return;
typedef struct prs__gpu_nvml_device_st *prs__gpu_nvml_device;

/* nvmlFieldValue_t (nvmlDeviceGetFieldValues), with the same layout: 40 bytes. */
typedef struct prs__gpu_nvml_field {
    unsigned field_id, scope_id;
    long long timestamp_us, latency_us;
    int value_type, nvml_return;
    union {
        double d;
        unsigned ui;
        unsigned long ul;
        unsigned long long ull;
        long long sll;
        int si;
        unsigned short us;
    } value;
} prs__gpu_nvml_field;
#define PRS__NVML_FI_DEV_POWER_INSTANT 186 /* the power now, milliwatts */

/* Sim state: atomics, so a controller on another thread may change the clock. */
typedef struct prs__gpu_sim_state {
    _Atomic int locked_mhz;     /* 0: default clock management (runs at f_max) */
    _Atomic long clock_changes; /* set/reset calls that changed the clock */
    _Atomic uint64_t energy_nj; /* cumulative energy, nanojoules */
    _Atomic uint64_t time_ns;   /* simulated clock, nanoseconds */
} prs__gpu_sim_state;

typedef struct prs__gpu_nvml_api {
    void *lib;
    prs__gpu_nvml_return (*init)(void);
    prs__gpu_nvml_return (*shutdown)(void);
    const char *(*error_string)(prs__gpu_nvml_return);
    prs__gpu_nvml_return (*handle_by_index)(unsigned, prs__gpu_nvml_device *);
    prs__gpu_nvml_return (*handle_by_uuid)(const char *, prs__gpu_nvml_device *);
    prs__gpu_nvml_return (*get_name)(prs__gpu_nvml_device, char *, unsigned);
    prs__gpu_nvml_return (*mem_clocks)(prs__gpu_nvml_device, unsigned *, unsigned *);
    prs__gpu_nvml_return (*gr_clocks)(prs__gpu_nvml_device, unsigned, unsigned *, unsigned *);
    prs__gpu_nvml_return (*set_locked)(prs__gpu_nvml_device, unsigned, unsigned);
    prs__gpu_nvml_return (*reset_locked)(prs__gpu_nvml_device);
    prs__gpu_nvml_return (*energy)(prs__gpu_nvml_device, unsigned long long *);
    prs__gpu_nvml_return (*power)(prs__gpu_nvml_device, unsigned *);
    /* Optional (NULL when the driver lacks them; the calls using them fail with a message). */
    prs__gpu_nvml_return (*get_uuid)(prs__gpu_nvml_device, char *, unsigned);
    prs__gpu_nvml_return (*pci_info)(prs__gpu_nvml_device, void *);
    prs__gpu_nvml_return (*clock_info)(prs__gpu_nvml_device, int, unsigned *);
    prs__gpu_nvml_return (*set_mem_locked)(prs__gpu_nvml_device, unsigned, unsigned);
    prs__gpu_nvml_return (*reset_mem_locked)(prs__gpu_nvml_device);
    prs__gpu_nvml_return (*handle_by_pci)(const char *, prs__gpu_nvml_device *);
    prs__gpu_nvml_return (*mig_mode)(prs__gpu_nvml_device, unsigned *, unsigned *);
    prs__gpu_nvml_return (*count)(unsigned *);
    prs__gpu_nvml_return (*field_values)(prs__gpu_nvml_device, int, prs__gpu_nvml_field *);
} prs__gpu_nvml_api;

/* Room for a GPU UUID ("GPU-" and 36 characters) and its terminating NUL, with margin. */
#define PRS__GPU_UUID_LEN 96

struct prs_gpu {
    int is_sim;
    int via_gpud; /* opened as "gpud...": clock changes only through the node's perseus-gpud */
    char name[96];
    char errmsg[256];
    /* sim */
    prs_gpu_preset preset;
    prs__gpu_sim_state *sim;
    double sim_jitter;  /* relative standard deviation of a computation's time and energy */
    uint64_t sim_rng;   /* its random numbers (splitmix64 state) */
    int sim_have_spare; /* Box-Muller's second normal, kept for the next draw */
    double sim_spare;
    /* nvml */
    prs__gpu_nvml_api nvml;
    prs__gpu_nvml_device dev;
    int no_instant_power; /* the driver refused the instantaneous power field: not asked again */
    unsigned index;
    char uuid[PRS__GPU_UUID_LEN]; /* "" unless opened by UUID */
    char pci[32];                 /* "" unless opened by PCI bus id ("00000000:1A:00.0") */
    char lib_path[512];           /* the NVML library it loaded */
};

/* gpu_fail.c: the message refusing MIG (what: the UUID, entry or GPU at fault); PRS_EINVAL. */
int prs__gpu_mig_refusal(prs_error *err, const char *what);
/* gpu_fail.c: record a message on g and return code. */
int prs__gpu_fail(prs_gpu *g, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* sim.c: the sim backend's side of the entry points of gpu.c (g->is_sim). */
void prs__gpu_sim_close(prs_gpu *g);
int prs__gpu_sim_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n);
int prs__gpu_sim_set_clock(prs_gpu *g, int freq_mhz);
int prs__gpu_sim_reset_clock(prs_gpu *g);
/* The clock work runs at: the locked one, else f_max. */
int prs__gpu_sim_effective_mhz(const prs_gpu *g);
int prs__gpu_sim_energy_mj(prs_gpu *g, uint64_t *energy_mj);
int prs__gpu_sim_power_mw(prs_gpu *g, unsigned *power_mw);
double prs__gpu_sim_now_s(prs_gpu *g);
double prs__gpu_sim_read_energy_j(prs_gpu *g);
int prs__gpu_sim_uuid(prs_gpu *g, char *buf, size_t n);

/* nvml.c. The device is found by g->pci when set, else by uuid when not NULL, else by index. */
int prs__gpu_nvml_open(prs_gpu *g, unsigned index, const char *uuid, const char *lib_path,
                       prs_error *err);
/* The UUIDs of every GPU NVML lists, in NVML (PCI) order: at most cap to uuids, the count to *n.
 * lib_path NULL: as prs_gpu_open. */
int prs__gpu_nvml_uuids(const char *lib_path, char (*uuids)[PRS__GPU_UUID_LEN], int cap, int *n,
                        prs_error *err);
void prs__gpu_nvml_close(prs_gpu *g);
int prs__gpu_nvml_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n);
int prs__gpu_nvml_set_clock(prs_gpu *g, int freq_mhz);
int prs__gpu_nvml_reset_clock(prs_gpu *g);
int prs__gpu_nvml_energy_mj(prs_gpu *g, uint64_t *energy_mj);
int prs__gpu_nvml_power_mw(prs_gpu *g, unsigned *power_mw);
/* nvml.c: identity, read-back of the SM clock, memory clock locks (perseus/gpu.h). */
int prs__gpu_nvml_uuid(prs_gpu *g, char *buf, size_t n);
int prs__gpu_nvml_pci_bus_id(prs_gpu *g, char *buf, size_t n);
int prs__gpu_nvml_sm_clock_now(prs_gpu *g, int *mhz);
int prs__gpu_nvml_lock_memory_max(prs_gpu *g);
int prs__gpu_nvml_reset_memory_clock(prs_gpu *g);
/* nvml.c: a new nvml handle found by index, UUID or PCI bus id (at most one of uuid, pci);
 * lib_path NULL: $PRS_NVML_LIBRARY, else libnvidia-ml.so.1. */
int prs__gpu_open_nvml_dev(unsigned index, const char *uuid, const char *pci, const char *lib_path,
                           prs_gpu **out, prs_error *err);

/* cuda.c: the UUID ("GPU-...") of CUDA device `ordinal` as the driver enumerates it (it applies
 * CUDA_VISIBLE_DEVICES); *count gets the number of devices CUDA sees. lib_path NULL:
 * $PRS_CUDA_LIBRARY, else libcuda.so.1. PRS_ENOLIB when the library cannot be loaded. */
int prs__gpu_cuda_device_uuid(const char *lib_path, int ordinal, char *buf, size_t n, int *count,
                              prs_error *err);

/* devsel.c: device selection (docs/client.md, 'Which GPU a rank drives'). */
/* prs_gpu_open for a spec starting with "nvml". */
int prs__gpu_open_nvml_spec(const char *spec, prs_gpu **out, prs_error *err);
/* $LOCAL_RANK (value v, NULL: unset) as a device index: 0 when unset; PRS_EINVAL unless digits
 * in [0, PRS_MAX_GPU_INDEX]. */
int prs__gpu_parse_local_rank(const char *v, int *index, prs_error *err);
/* The physical GPU that CUDA device `index` is under CUDA_VISIBLE_DEVICES = cvd (NULL: unset),
 * resolved against the node's UUIDs in NVML order (uuids[0..n)), as the driver does: entries are
 * NVML indices or (unique prefixes of) GPU UUIDs; an invalid or repeated entry ends the list.
 * who names the index in messages ("LOCAL_RANK=3"). Writes the UUID to out (outn bytes). */
int prs__gpu_cvd_resolve(const char *cvd, int index, const char *who,
                         char (*uuids)[PRS__GPU_UUID_LEN], int n, char *out, size_t outn,
                         prs_error *err);
/* "00000000:1A:00.0" from "DOMAIN:BUS:DEV.FN" (4 or 8 hex digits of domain, any case). */
int prs__gpu_pci_normalize(const char *in, char *out, size_t n, prs_error *err);

#endif
