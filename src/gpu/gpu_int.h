/* Internal to the GPU backends (src/gpu): the handle, the backend table, and helpers shared by
 * gpu.c (dispatch, sim), nvml.c and clockctl.c. */
#ifndef PRS_GPU_INT_H
#define PRS_GPU_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "perseus/gpu.h"

/* Opaque NVML types, declared here instead of NVIDIA's nvml.h (same ABI: an int result, a
 * pointer-sized device handle). */
typedef int gpuI_nvml_return;
typedef struct gpuI_nvml_device_st *gpuI_nvml_device;

/* Sim state: atomics, so a controller on another thread may change the clock. */
typedef struct gpuI_sim_state {
    _Atomic int locked_mhz;     /* 0: default clock management (runs at f_max) */
    _Atomic long clock_changes; /* set/reset calls that changed the clock */
    _Atomic uint64_t energy_nj; /* cumulative energy, nanojoules */
    _Atomic uint64_t time_ns;   /* simulated clock, nanoseconds */
} gpuI_sim_state;

typedef struct gpuI_nvml_api {
    void *lib;
    gpuI_nvml_return (*init)(void);
    gpuI_nvml_return (*shutdown)(void);
    const char *(*error_string)(gpuI_nvml_return);
    gpuI_nvml_return (*handle_by_index)(unsigned, gpuI_nvml_device *);
    gpuI_nvml_return (*handle_by_uuid)(const char *, gpuI_nvml_device *);
    gpuI_nvml_return (*get_name)(gpuI_nvml_device, char *, unsigned);
    gpuI_nvml_return (*mem_clocks)(gpuI_nvml_device, unsigned *, unsigned *);
    gpuI_nvml_return (*gr_clocks)(gpuI_nvml_device, unsigned, unsigned *, unsigned *);
    gpuI_nvml_return (*set_locked)(gpuI_nvml_device, unsigned, unsigned);
    gpuI_nvml_return (*reset_locked)(gpuI_nvml_device);
    gpuI_nvml_return (*energy)(gpuI_nvml_device, unsigned long long *);
    gpuI_nvml_return (*power)(gpuI_nvml_device, unsigned *);
    /* Optional (NULL when the driver lacks them; the calls using them fail with a message). */
    gpuI_nvml_return (*get_uuid)(gpuI_nvml_device, char *, unsigned);
    gpuI_nvml_return (*pci_info)(gpuI_nvml_device, void *);
    gpuI_nvml_return (*clock_info)(gpuI_nvml_device, int, unsigned *);
    gpuI_nvml_return (*set_mem_locked)(gpuI_nvml_device, unsigned, unsigned);
    gpuI_nvml_return (*reset_mem_locked)(gpuI_nvml_device);
} gpuI_nvml_api;

struct prs_gpu {
    int is_sim;
    int via_gpud; /* opened as "gpud...": clock changes only through the node's perseus-gpud */
    char name[96];
    char errmsg[256];
    /* sim */
    prs_gpu_preset preset;
    gpuI_sim_state *sim;
    /* nvml */
    gpuI_nvml_api nvml;
    gpuI_nvml_device dev;
    unsigned index;
    char uuid[96];      /* "" unless opened by UUID */
    char lib_path[512]; /* the NVML library it loaded */
};

/* gpu_fail.c: record a message on g and return code. */
int gpuI_fail(prs_gpu *g, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* nvml.c */
int gpuI_nvml_open(prs_gpu *g, unsigned index, const char *uuid, const char *lib_path,
                   prs_error *err);
void gpuI_nvml_close(prs_gpu *g);
int gpuI_nvml_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n);
int gpuI_nvml_set_clock(prs_gpu *g, int freq_mhz);
int gpuI_nvml_reset_clock(prs_gpu *g);
int gpuI_nvml_energy_mj(prs_gpu *g, uint64_t *energy_mj);
int gpuI_nvml_power_mw(prs_gpu *g, unsigned *power_mw);
/* nvml.c: identity, read-back of the SM clock, memory clock locks (perseus/gpu.h). */
int gpuI_nvml_uuid(prs_gpu *g, char *buf, size_t n);
int gpuI_nvml_pci_bus_id(prs_gpu *g, char *buf, size_t n);
int gpuI_nvml_sm_clock_now(prs_gpu *g, int *mhz);
int gpuI_nvml_lock_memory_max(prs_gpu *g);
int gpuI_nvml_reset_memory_clock(prs_gpu *g);

#endif
