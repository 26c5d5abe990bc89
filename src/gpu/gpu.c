/* GPU backends: the common entry points (perseus/gpu.h), dispatching to the sim backend (sim.c)
 * or the nvml one (nvml.c).
 *
 * The handle is one struct for both backends (a flag picks the branch; two backends do not need a
 * function table). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/clock.h"
#include "gpu_int.h"

int prs_gpu_open_nvml(unsigned index, const char *lib_path, prs_gpu **out, prs_error *err)
{
    return prs__gpu_open_nvml_dev(index, NULL, NULL, lib_path, out, err);
}

int prs_gpu_open_nvml_uuid(const char *uuid, const char *lib_path, prs_gpu **out, prs_error *err)
{
    if (uuid && strncmp(uuid, "MIG-", 4) == 0) {
        *out = NULL;
        return prs__gpu_mig_refusal(err, uuid);
    }
    if (!uuid || strncmp(uuid, "GPU-", 4) != 0) {
        *out = NULL;
        return prs_error_set(err, PRS_EINVAL, "GPU UUID: expected GPU-..., got '%.60s'",
                             uuid ? uuid : "(null)");
    }
    return prs__gpu_open_nvml_dev(0, uuid, NULL, lib_path, out, err);
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
    /* prs_gpu_open sets *out whenever it returns 0; the analyzer cannot see that its error
     * paths (prs_error_set, in another file) return non-zero */
    if (!rc) (*out)->via_gpud = 1; // NOLINT(clang-analyzer-core.NullDereference)
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
        return prs__gpu_open_nvml_spec(spec, out, err);
    return prs_error_set(err, PRS_EINVAL,
                         "GPU backend '%.80s': expected sim, sim:PRESET, nvml, nvml:INDEX, "
                         "nvml:GPU-UUID, nvml:uuid=GPU-UUID or nvml:pci=DOMAIN:BUS:DEV.FN",
                         spec);
}

void prs_gpu_close(prs_gpu *g)
{
    if (!g) return;
    if (g->is_sim)
        prs__gpu_sim_close(g);
    else
        prs__gpu_nvml_close(g);
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
        return prs__gpu_fail(g, PRS_EINVAL, "clocks: bad buffer");
    return g->is_sim ? prs__gpu_sim_clocks(g, clocks_mhz, cap, n)
                     : prs__gpu_nvml_clocks(g, clocks_mhz, cap, n);
}

int prs_gpu_set_clock(prs_gpu *g, int freq_mhz)
{
    return g->is_sim ? prs__gpu_sim_set_clock(g, freq_mhz) : prs__gpu_nvml_set_clock(g, freq_mhz);
}

int prs_gpu_reset_clock(prs_gpu *g)
{
    return g->is_sim ? prs__gpu_sim_reset_clock(g) : prs__gpu_nvml_reset_clock(g);
}

int prs_gpu_energy_mj(prs_gpu *g, uint64_t *energy_mj)
{
    return g->is_sim ? prs__gpu_sim_energy_mj(g, energy_mj) : prs__gpu_nvml_energy_mj(g, energy_mj);
}

int prs_gpu_power_mw(prs_gpu *g, unsigned *power_mw)
{
    return g->is_sim ? prs__gpu_sim_power_mw(g, power_mw) : prs__gpu_nvml_power_mw(g, power_mw);
}

double prs_gpu_now_s(prs_gpu *g)
{
    return g->is_sim ? prs__gpu_sim_now_s(g) : prs_mono_s();
}

double prs_gpu_read_energy_j(prs_gpu *g)
{
    if (g->is_sim) return prs__gpu_sim_read_energy_j(g);
    uint64_t mj;
    if (prs__gpu_nvml_energy_mj(g, &mj)) return NAN;
    return 1e-3 * (double)mj;
}

/* ---- identity, read-back, memory clocks (perseus/gpu.h) ---- */

int prs_gpu_uuid(prs_gpu *g, char *buf, size_t n)
{
    if (!buf || n < 41) return prs__gpu_fail(g, PRS_EINVAL, "uuid: buffer must hold 41 bytes");
    return g->is_sim ? prs__gpu_sim_uuid(g, buf, n) : prs__gpu_nvml_uuid(g, buf, n);
}

int prs_gpu_pci_bus_id(prs_gpu *g, char *buf, size_t n)
{
    if (!buf || n < 32)
        return prs__gpu_fail(g, PRS_EINVAL, "pci bus id: buffer must hold 32 bytes");
    if (!g->is_sim) return prs__gpu_nvml_pci_bus_id(g, buf, n);
    return prs__gpu_fail(g, PRS_EINVAL, "sim GPU: no PCI bus id");
}

int prs_gpu_sm_clock_now(prs_gpu *g, int *mhz)
{
    if (!g->is_sim) return prs__gpu_nvml_sm_clock_now(g, mhz);
    *mhz = prs__gpu_sim_effective_mhz(g);
    return 0;
}

int prs_gpu_lock_memory_max(prs_gpu *g)
{
    return g->is_sim ? 0 : prs__gpu_nvml_lock_memory_max(g);
}

int prs_gpu_reset_memory_clock(prs_gpu *g)
{
    return g->is_sim ? 0 : prs__gpu_nvml_reset_memory_clock(g);
}
