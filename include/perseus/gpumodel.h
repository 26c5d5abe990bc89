/* The simulated GPU: a documented, physically plausible model of how long one computation takes
 * and how much energy it costs at a given SM clock, and GPU presets with figures from public spec
 * sheets. The generator of synthetic stage profiles built on the model is in perseus/synth.h
 * (the planner core implements it; this header includes it, for callers that look for it here).
 *
 * Model, per computation, at SM clock f (MHz):
 *   time    t(f) = t_ref · (α · f_max / f + (1 − α))
 *   power   P(f) = P_static + (P_busy_max − P_static) · (f / f_max)^γ
 *   energy  E(f) = P(f) · t(f)
 * α is the compute-bound share of the work (the part that scales with the clock; the rest is
 * memory- or launch-bound), t_ref the time at f_max. P_static is the part of busy power that
 * does not scale with the SM clock (leakage, HBM, fabric); the dynamic part grows as f^γ because
 * voltage rises with the clock (γ = 3 for V ∝ f). With a large enough P_static the energy is
 * U-shaped in f: below the minimum-energy clock a computation is slower AND costlier, so
 * the lowest clocks are dominated, as on real GPUs.
 *
 * Every function here is pure; presets are static read-only data. */
#ifndef PERSEUS_GPUMODEL_H
#define PERSEUS_GPUMODEL_H

#include "perseus/export.h"

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"
#include "perseus/profile.h" /* prs_instr */

#ifdef __cplusplus
extern "C" {
#endif

/* One kind of computation (a forward or a backward of one stage), as the model sees it. */
typedef struct prs_gpu_work {
    double t_ref_s; /* time of one computation at f_max, seconds; > 0 */
    double alpha;   /* compute-bound share, in [0, 1] */
} prs_gpu_work;

/* A GPU model: a value type. The built-in presets are returned by prs_gpu_preset_find and
 * prs_gpu_preset_at; callers may also fill one themselves (check it with prs_gpu_preset_check). */
typedef struct prs_gpu_preset {
    const char *name;        /* short lower-case key: "a100" */
    const char *description; /* "NVIDIA A100-SXM4, ..." */
    int f_min_mhz;           /* lowest supported SM clock */
    int f_max_mhz;           /* highest supported SM clock (the model's f_max) */
    int f_step_mhz;          /* supported clocks are f_max, f_max - step, ..., f_min */
    int prof_min_mhz;        /* default profiling range is prof_min_mhz..f_max_mhz */
    double tdp_w;            /* board power limit from the spec sheet (reference only) */
    double p_static_w;       /* P_static: busy power that does not scale with the clock */
    double p_busy_max_w;     /* P_busy_max: busy power at f_max */
    double gamma;            /* exponent of the dynamic power, γ */
    double blocking_power_w; /* power while blocked on communication (not computing) */
    prs_gpu_work work[2];    /* defaults for a GPT-3-like stage, indexed by prs_instr */
} prs_gpu_preset;

/* Built-in presets: "a100", "a40", "h100". Lookup ignores ASCII case; NULL if unknown.
 * Returned pointers are to static data, valid for the life of the program. */
PRS_API const prs_gpu_preset *prs_gpu_preset_find(const char *name);
PRS_API int prs_gpu_preset_count(void);
/* i in [0, prs_gpu_preset_count()); NULL otherwise. */
PRS_API const prs_gpu_preset *prs_gpu_preset_at(int i);
/* Write the preset names, comma-separated ("a100, a40, h100"), into buf (always NUL-terminated
 * when n > 0). Returns buf. */
PRS_API char *prs_gpu_preset_names(char *buf, size_t n);

/* Check that a preset is usable: clocks positive, f_min <= prof_min <= f_max on the step grid,
 * 0 <= p_static < p_busy_max, gamma > 0, blocking power >= 0, work defaults valid. */
PRS_API int prs_gpu_preset_check(const prs_gpu_preset *g, prs_error *err);
/* Check t_ref_s > 0 and finite, alpha in [0, 1]. what names the work in messages. */
PRS_API int prs_gpu_work_check(const prs_gpu_work *w, const char *what, prs_error *err);

/* Number of supported clocks, and the i-th one, highest first (i = 0 is f_max), as nvidia-smi
 * lists them. prs_gpu_clock_at returns 0 when i is out of range. */
PRS_API int prs_gpu_num_clocks(const prs_gpu_preset *g);
PRS_API int prs_gpu_clock_at(const prs_gpu_preset *g, int i);
/* 1 if freq_mhz is one of the supported clocks, else 0. */
PRS_API int prs_gpu_clock_supported(const prs_gpu_preset *g, int freq_mhz);

/* The model at clock freq_mhz (> 0; clocks outside the supported range are extrapolated); g and
 * w must be non-NULL (check them once with prs_gpu_preset_check). These return NAN when
 * freq_mhz <= 0. When gamma is an integer the power is computed with
 * multiplications only, so results are bit-identical on every IEEE-754 platform. */
PRS_API double prs_gpu_time_s(const prs_gpu_preset *g, const prs_gpu_work *w, double freq_mhz);
PRS_API double prs_gpu_power_w(const prs_gpu_preset *g, double freq_mhz);
PRS_API double prs_gpu_energy_j(const prs_gpu_preset *g, const prs_gpu_work *w, double freq_mhz);

#ifdef __cplusplus
}
#endif

#include "perseus/synth.h"
#endif
