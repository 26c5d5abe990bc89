/* The sim backend (perseus/gpu.h): the GPU model of gpumodel.h with a state: the locked clock, a
 * simulated clock and an energy counter. Nothing advances on its own: the caller says that a
 * computation ran (prs_gpu_sim_run: time and energy from the model at the clock in effect) or that
 * the GPU waited (prs_gpu_sim_idle: blocking power), so a test gets the same figures on every run.
 * Its fields are atomics in a shared mapping, so an inline clock controller on another thread (a
 * stream's host function) sets the clock the caller's work runs at. gpu.c dispatches here. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "gpu_int.h"

#define NJ_PER_MJ 1000000u /* the energy counter is in nanojoules, NVML's in millijoules */

int prs_gpu_open_sim(const prs_gpu_preset *preset, prs_gpu **out, prs_error *err)
{
    *out = NULL;
    if (!preset) preset = prs_gpu_preset_find("a100");
    int rc = prs_gpu_preset_check(preset, err);
    if (rc) return rc;
    prs_gpu *g = calloc(1, sizeof *g);
    if (!g) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    void *m = mmap(NULL, sizeof(prs__gpu_sim_state), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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

void prs__gpu_sim_close(prs_gpu *g)
{
    munmap(g->sim, sizeof *g->sim);
}

int prs__gpu_sim_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n)
{
    *n = prs_gpu_num_clocks(&g->preset);
    for (int i = 0; i < *n && i < cap; i++)
        clocks_mhz[i] = prs_gpu_clock_at(&g->preset, i);
    return 0;
}

int prs__gpu_sim_set_clock(prs_gpu *g, int freq_mhz)
{
    if (!prs_gpu_clock_supported(&g->preset, freq_mhz))
        return prs__gpu_fail(g, PRS_EGPU, "sim GPU: %d MHz is not a supported clock", freq_mhz);
    if (atomic_exchange(&g->sim->locked_mhz, freq_mhz) != freq_mhz)
        atomic_fetch_add(&g->sim->clock_changes, 1);
    return 0;
}

int prs__gpu_sim_reset_clock(prs_gpu *g)
{
    if (atomic_exchange(&g->sim->locked_mhz, 0) != 0) atomic_fetch_add(&g->sim->clock_changes, 1);
    return 0;
}

int prs__gpu_sim_effective_mhz(const prs_gpu *g)
{
    int f = atomic_load(&g->sim->locked_mhz);
    return f > 0 ? f : g->preset.f_max_mhz;
}

int prs__gpu_sim_energy_mj(prs_gpu *g, uint64_t *energy_mj)
{
    *energy_mj = atomic_load(&g->sim->energy_nj) / NJ_PER_MJ;
    return 0;
}

int prs__gpu_sim_power_mw(prs_gpu *g, unsigned *power_mw)
{
    *power_mw =
        (unsigned)lround(1000.0 * prs_gpu_power_w(&g->preset, prs__gpu_sim_effective_mhz(g)));
    return 0;
}

double prs__gpu_sim_now_s(prs_gpu *g)
{
    return 1e-9 * (double)atomic_load(&g->sim->time_ns);
}

double prs__gpu_sim_read_energy_j(prs_gpu *g)
{
    return 1e-9 * (double)atomic_load(&g->sim->energy_nj);
}

int prs__gpu_sim_uuid(prs_gpu *g, char *buf, size_t n)
{
    snprintf(buf, n, "GPU-51300000-0000-0000-0000-%012x", g->index);
    return 0;
}

int prs_gpu_sim_clock(prs_gpu *g, int *freq_mhz)
{
    if (!g->is_sim) return prs__gpu_fail(g, PRS_EINVAL, "not a sim GPU");
    *freq_mhz = atomic_load(&g->sim->locked_mhz);
    return 0;
}

static void sim_advance(prs_gpu *g, double time_s, double energy_j)
{
    atomic_fetch_add(&g->sim->time_ns, (uint64_t)llround(time_s * 1e9));
    atomic_fetch_add(&g->sim->energy_nj, (uint64_t)llround(energy_j * 1e9));
}

int prs_gpu_sim_set_jitter(prs_gpu *g, double frac, uint64_t seed)
{
    if (!g->is_sim) return prs__gpu_fail(g, PRS_EINVAL, "not a sim GPU");
    if (!(frac >= 0 && frac <= 0.2))
        return prs__gpu_fail(g, PRS_EINVAL, "sim: jitter must be in [0, 0.2]");
    g->sim_jitter = frac;
    g->sim_rng = seed;
    g->sim_have_spare = 0;
    return 0;
}

/* Uniform in (0, 1) from splitmix64. */
static double sim_uniform(prs_gpu *g)
{
    uint64_t z = (g->sim_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* 1 + jitter * z, z standard normal (Box-Muller) clipped to +-4. */
static double sim_noise(prs_gpu *g)
{
    double z;
    if (g->sim_have_spare) {
        g->sim_have_spare = 0;
        z = g->sim_spare;
    } else {
        double r = sqrt(-2.0 * log(sim_uniform(g))), a = 6.283185307179586 * sim_uniform(g);
        g->sim_spare = r * sin(a);
        g->sim_have_spare = 1;
        z = r * cos(a);
    }
    return 1.0 + g->sim_jitter * (z > 4 ? 4 : z < -4 ? -4 : z);
}

int prs_gpu_sim_run(prs_gpu *g, const prs_gpu_work *w, double *time_s)
{
    if (!g->is_sim) return prs__gpu_fail(g, PRS_EINVAL, "not a sim GPU");
    prs_error e;
    if (!w || prs_gpu_work_check(w, "work", &e))
        return prs__gpu_fail(g, PRS_EINVAL, "sim: bad work");
    int f = prs__gpu_sim_effective_mhz(g);
    double t = prs_gpu_time_s(&g->preset, w, f), en = prs_gpu_energy_j(&g->preset, w, f);
    if (g->sim_jitter > 0) {
        t *= sim_noise(g);
        en *= sim_noise(g);
    }
    sim_advance(g, t, en);
    if (time_s) *time_s = t;
    return 0;
}

int prs_gpu_sim_idle(prs_gpu *g, double seconds)
{
    if (!g->is_sim) return prs__gpu_fail(g, PRS_EINVAL, "not a sim GPU");
    if (!(seconds >= 0) || !isfinite(seconds))
        return prs__gpu_fail(g, PRS_EINVAL, "sim: idle time must be >= 0");
    sim_advance(g, seconds, seconds * g->preset.blocking_power_w);
    return 0;
}

long prs_gpu_sim_clock_changes(prs_gpu *g)
{
    return g->is_sim ? atomic_load(&g->sim->clock_changes) : 0;
}
