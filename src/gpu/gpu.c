/* GPU backends: the common entry points (perseus/gpu.h) and the sim backend.
 *
 * The handle is one struct for both backends (a flag picks the branch; two backends do not need a
 * function table). The sim backend is the GPU model of gpumodel.h with a state: the locked clock,
 * a simulated clock and an energy counter. Nothing advances on its own: the caller says that a
 * computation ran (prs_gpu_sim_run: time and energy from the model at the clock in effect) or that
 * the GPU waited (prs_gpu_sim_idle: blocking power), so a test gets the same figures on every run.
 * Its fields are atomics, so an inline clock controller on another thread (a stream's host
 * function) sets the clock the caller's work runs at. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "gpu_int.h"

int prs_gpu_open_sim(const prs_gpu_preset *preset, prs_gpu **out, prs_error *err)
{
    *out = NULL;
    if (!preset) preset = prs_gpu_preset_find("a100");
    int rc = prs_gpu_preset_check(preset, err);
    if (rc) return rc;
    prs_gpu *g = calloc(1, sizeof *g);
    if (!g) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    void *m = mmap(NULL, sizeof(gpuI_sim_state), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) {
        free(g);
        return prs_error_set(err, PRS_ENOMEM, "sim GPU: cannot map its state");
    }
    g->sim = m;
    atomic_init(&g->sim->locked_mhz, 0);
    atomic_init(&g->sim->clock_changes, 0);
    atomic_init(&g->sim->energy_nj, 0);
    atomic_init(&g->sim->time_ns, 0);
    g->is_sim = 1;
    static _Atomic unsigned sim_serial;
    g->index = atomic_fetch_add(&sim_serial, 1); /* the synthetic UUID's last digits */
    g->preset = *preset;
    snprintf(g->name, sizeof g->name, "sim-%s", preset->name ? preset->name : "gpu");
    *out = g;
    return 0;
}

int prs_gpu_open_nvml(unsigned index, const char *lib_path, prs_gpu **out, prs_error *err)
{
    return gpuI_open_nvml_dev(index, NULL, NULL, lib_path, out, err);
}

int prs_gpu_open_nvml_uuid(const char *uuid, const char *lib_path, prs_gpu **out, prs_error *err)
{
    if (uuid && strncmp(uuid, "MIG-", 4) == 0) {
        *out = NULL;
        return gpuI_mig_refusal(err, uuid);
    }
    if (!uuid || strncmp(uuid, "GPU-", 4) != 0) {
        *out = NULL;
        return prs_error_set(err, PRS_EINVAL, "GPU UUID: expected GPU-..., got '%.60s'",
                             uuid ? uuid : "(null)");
    }
    return gpuI_open_nvml_dev(0, uuid, NULL, lib_path, out, err);
}

/* "gpud" and "gpud:REST": the nvml GPU "nvml" / "nvml:REST", whose clocks change only through
 * the node's perseus-gpud. */
static int open_gpud(const char *spec, prs_gpu **out, prs_error *err)
{
    char nv[160];
    if (strlen(spec) >= sizeof nv - 1)
        return prs_error_set(err, PRS_EINVAL, "GPU backend '%.60s...': too long", spec);
    snprintf(nv, sizeof nv, "nvml%s", spec + 4);
    int rc = prs_gpu_open(nv, out, err);
    if (!rc) (*out)->via_gpud = 1;
    return rc;
}

int prs_gpu_open(const char *spec, prs_gpu **out, prs_error *err)
{
    *out = NULL;
    if (!spec) return prs_error_set(err, PRS_EINVAL, "GPU backend: no spec");
    if (strncmp(spec, "gpud", 4) == 0 && (spec[4] == '\0' || spec[4] == ':'))
        return open_gpud(spec, out, err);
    if (strcmp(spec, "sim") == 0) return prs_gpu_open_sim(NULL, out, err);
    if (strncmp(spec, "sim:", 4) == 0) {
        const prs_gpu_preset *p = prs_gpu_preset_find(spec + 4);
        if (!p) {
            char names[128];
            return prs_error_set(err, PRS_EINVAL, "GPU backend '%s': unknown preset (known: %s)",
                                 spec, prs_gpu_preset_names(names, sizeof names));
        }
        return prs_gpu_open_sim(p, out, err);
    }
    if (strncmp(spec, "nvml", 4) == 0 && (spec[4] == '\0' || spec[4] == ':'))
        return gpuI_open_nvml_spec(spec, out, err);
    return prs_error_set(err, PRS_EINVAL,
                         "GPU backend '%.80s': expected sim, sim:PRESET, nvml, nvml:INDEX, "
                         "nvml:GPU-UUID, nvml:uuid=GPU-UUID or nvml:pci=DOMAIN:BUS:DEV.FN",
                         spec);
}

void prs_gpu_close(prs_gpu *g)
{
    if (!g) return;
    if (g->is_sim)
        munmap(g->sim, sizeof *g->sim);
    else
        gpuI_nvml_close(g);
    free(g);
}

const char *prs_gpu_backend(const prs_gpu *g)
{
    return g->is_sim ? "sim" : "nvml";
}

int prs_gpu_via_gpud(const prs_gpu *g)
{
    return g->via_gpud;
}

const char *prs_gpu_name(const prs_gpu *g)
{
    return g->name;
}

const char *prs_gpu_errmsg(const prs_gpu *g)
{
    return g->errmsg;
}

int prs_gpu_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n)
{
    if (cap < 0 || (cap > 0 && !clocks_mhz) || !n)
        return gpuI_fail(g, PRS_EINVAL, "clocks: bad buffer");
    if (!g->is_sim) return gpuI_nvml_clocks(g, clocks_mhz, cap, n);
    *n = prs_gpu_num_clocks(&g->preset);
    for (int i = 0; i < *n && i < cap; i++)
        clocks_mhz[i] = prs_gpu_clock_at(&g->preset, i);
    return 0;
}

int prs_gpu_set_clock(prs_gpu *g, int freq_mhz)
{
    if (!g->is_sim) return gpuI_nvml_set_clock(g, freq_mhz);
    if (!prs_gpu_clock_supported(&g->preset, freq_mhz))
        return gpuI_fail(g, PRS_EGPU, "sim GPU: %d MHz is not a supported clock", freq_mhz);
    if (atomic_exchange(&g->sim->locked_mhz, freq_mhz) != freq_mhz)
        atomic_fetch_add(&g->sim->clock_changes, 1);
    return 0;
}

int prs_gpu_reset_clock(prs_gpu *g)
{
    if (!g->is_sim) return gpuI_nvml_reset_clock(g);
    if (atomic_exchange(&g->sim->locked_mhz, 0) != 0) atomic_fetch_add(&g->sim->clock_changes, 1);
    return 0;
}

static int sim_effective_mhz(const prs_gpu *g)
{
    int f = atomic_load(&g->sim->locked_mhz);
    return f > 0 ? f : g->preset.f_max_mhz;
}

int prs_gpu_energy_mj(prs_gpu *g, uint64_t *energy_mj)
{
    if (!g->is_sim) return gpuI_nvml_energy_mj(g, energy_mj);
    *energy_mj = atomic_load(&g->sim->energy_nj) / 1000000u;
    return 0;
}

int prs_gpu_power_mw(prs_gpu *g, unsigned *power_mw)
{
    if (!g->is_sim) return gpuI_nvml_power_mw(g, power_mw);
    *power_mw = (unsigned)lround(1000.0 * prs_gpu_power_w(&g->preset, sim_effective_mhz(g)));
    return 0;
}

double prs_gpu_now_s(prs_gpu *g)
{
    if (g->is_sim) return 1e-9 * (double)atomic_load(&g->sim->time_ns);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double prs_gpu_read_energy_j(prs_gpu *g)
{
    if (g->is_sim) return 1e-9 * (double)atomic_load(&g->sim->energy_nj);
    uint64_t mj;
    if (gpuI_nvml_energy_mj(g, &mj)) return NAN;
    return 1e-3 * (double)mj;
}

int prs_gpu_sim_clock(prs_gpu *g, int *freq_mhz)
{
    if (!g->is_sim) return gpuI_fail(g, PRS_EINVAL, "not a sim GPU");
    *freq_mhz = atomic_load(&g->sim->locked_mhz);
    return 0;
}

static void sim_advance(prs_gpu *g, double time_s, double energy_j)
{
    atomic_fetch_add(&g->sim->time_ns, (uint64_t)llround(time_s * 1e9));
    atomic_fetch_add(&g->sim->energy_nj, (uint64_t)llround(energy_j * 1e9));
}

int prs_gpu_sim_run(prs_gpu *g, const prs_gpu_work *w, double *time_s)
{
    if (!g->is_sim) return gpuI_fail(g, PRS_EINVAL, "not a sim GPU");
    prs_error e;
    if (!w || prs_gpu_work_check(w, "work", &e)) return gpuI_fail(g, PRS_EINVAL, "sim: bad work");
    int f = sim_effective_mhz(g);
    double t = prs_gpu_time_s(&g->preset, w, f);
    sim_advance(g, t, prs_gpu_energy_j(&g->preset, w, f));
    if (time_s) *time_s = t;
    return 0;
}

int prs_gpu_sim_idle(prs_gpu *g, double seconds)
{
    if (!g->is_sim) return gpuI_fail(g, PRS_EINVAL, "not a sim GPU");
    if (!(seconds >= 0) || !isfinite(seconds))
        return gpuI_fail(g, PRS_EINVAL, "sim: idle time must be >= 0");
    sim_advance(g, seconds, seconds * g->preset.blocking_power_w);
    return 0;
}

long prs_gpu_sim_clock_changes(prs_gpu *g)
{
    return g->is_sim ? atomic_load(&g->sim->clock_changes) : 0;
}

/* ---- identity, read-back, memory clocks (perseus/gpu.h) ---- */

int prs_gpu_uuid(prs_gpu *g, char *buf, size_t n)
{
    if (!buf || n < 41) return gpuI_fail(g, PRS_EINVAL, "uuid: buffer must hold 41 bytes");
    if (!g->is_sim) return gpuI_nvml_uuid(g, buf, n);
    snprintf(buf, n, "GPU-51300000-0000-0000-0000-%012x", g->index);
    return 0;
}

int prs_gpu_pci_bus_id(prs_gpu *g, char *buf, size_t n)
{
    if (!buf || n < 32) return gpuI_fail(g, PRS_EINVAL, "pci bus id: buffer must hold 32 bytes");
    if (!g->is_sim) return gpuI_nvml_pci_bus_id(g, buf, n);
    return gpuI_fail(g, PRS_EINVAL, "sim GPU: no PCI bus id");
}

int prs_gpu_sm_clock_now(prs_gpu *g, int *mhz)
{
    if (!g->is_sim) return gpuI_nvml_sm_clock_now(g, mhz);
    *mhz = sim_effective_mhz(g);
    return 0;
}

int prs_gpu_lock_memory_max(prs_gpu *g)
{
    return g->is_sim ? 0 : gpuI_nvml_lock_memory_max(g);
}

int prs_gpu_reset_memory_clock(prs_gpu *g)
{
    return g->is_sim ? 0 : gpuI_nvml_reset_memory_clock(g);
}
