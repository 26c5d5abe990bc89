/* The simulated GPU: a documented, physically plausible model of how long one computation takes
 * and how much energy it costs at a given SM clock, GPU presets with figures from public spec
 * sheets, and a generator of synthetic stage profiles built on the model.
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

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"
#include "perseus/profile.h"

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
const prs_gpu_preset *prs_gpu_preset_find(const char *name);
int prs_gpu_preset_count(void);
/* i in [0, prs_gpu_preset_count()); NULL otherwise. */
const prs_gpu_preset *prs_gpu_preset_at(int i);
/* Write the preset names, comma-separated ("a100, a40, h100"), into buf (always NUL-terminated
 * when n > 0). Returns buf. */
char *prs_gpu_preset_names(char *buf, size_t n);

/* Check that a preset is usable: clocks positive, f_min <= prof_min <= f_max on the step grid,
 * 0 <= p_static < p_busy_max, gamma > 0, blocking power >= 0, work defaults valid. */
int prs_gpu_preset_check(const prs_gpu_preset *g, prs_error *err);
/* Check t_ref_s > 0 and finite, alpha in [0, 1]. what names the work in messages. */
int prs_gpu_work_check(const prs_gpu_work *w, const char *what, prs_error *err);

/* Number of supported clocks, and the i-th one, highest first (i = 0 is f_max), as nvidia-smi
 * lists them. prs_gpu_clock_at returns 0 when i is out of range. */
int prs_gpu_num_clocks(const prs_gpu_preset *g);
int prs_gpu_clock_at(const prs_gpu_preset *g, int i);
/* 1 if freq_mhz is one of the supported clocks, else 0. */
int prs_gpu_clock_supported(const prs_gpu_preset *g, int freq_mhz);

/* The model at clock freq_mhz (> 0; clocks outside the supported range are extrapolated); g and
 * w must be non-NULL (check them once with prs_gpu_preset_check). These return NAN when
 * freq_mhz <= 0. When gamma is an integer the power is computed with
 * multiplications only, so results are bit-identical on every IEEE-754 platform. */
double prs_gpu_time_s(const prs_gpu_preset *g, const prs_gpu_work *w, double freq_mhz);
double prs_gpu_power_w(const prs_gpu_preset *g, double freq_mhz);
double prs_gpu_energy_j(const prs_gpu_preset *g, const prs_gpu_work *w, double freq_mhz);

/* ---- Synthetic stage profiles ---- */

#define PRS_SYNTH_MAX_STAGES 1024
/* Default time multiplier of the last stage when no imbalance is given: in GPT-3 the last stage
 * also runs the LM head and the loss and is about 7 % slower (sosp24 stage profile). */
#define PRS_SYNTH_LAST_STAGE_DEFAULT 1.07
/* Noise amplitudes must stay below this (times and energies must stay positive). */
#define PRS_SYNTH_MAX_NOISE 0.5

typedef struct prs_synth_opts {
    const prs_gpu_preset *gpu; /* NULL: the "a100" preset */
    int stages;                /* number of pipeline stages, 1..PRS_SYNTH_MAX_STAGES */
    /* Clock sweep f_max_mhz, f_max_mhz - f_step_mhz, ..., f_min_mhz. 0 picks the preset's
     * default (prof_min_mhz, f_max_mhz, f_step_mhz). Both ends must be supported clocks, the
     * step a multiple of the preset's, and the range a whole number of steps. */
    int f_min_mhz, f_max_mhz, f_step_mhz;
    /* Work of one computation of a stage with multiplier 1, indexed by prs_instr. A t_ref_s of 0
     * takes the preset's default t_ref_s and alpha for that instruction. */
    prs_gpu_work work[2];
    /* Per-stage multipliers of t_ref (stage s's computations take imbalance[s] times as long),
     * n_imbalance == stages, each finite and in (0, 100]. NULL: 1 for every stage except the
     * last, which gets PRS_SYNTH_LAST_STAGE_DEFAULT when stages >= 2. Not owned; read only
     * during the call. */
    const double *imbalance;
    int n_imbalance;
    /* Measurement noise: each row's time and power are multiplied by independent factors
     * 1 + noise·u, u uniform in [-1, 1), from a splitmix64 stream seeded with seed. noise in
     * [0, PRS_SYNTH_MAX_NOISE); 0 makes the output independent of seed. */
    double noise;
    uint64_t seed;
} prs_synth_opts;

/* Defaults: a100, 1 stage, preset clock range and work, default imbalance, no noise, seed 0. */
void prs_synth_opts_init(prs_synth_opts *o);

/* Build a profile: for each stage, for each clock from highest to lowest, a forward then a
 * backward row (the order of the artifact's profiles). Deterministic for given options. On
 * success *out owns a new profile (free with prs_profile_free); on failure *out is NULL and err
 * names the offending option (PRS_EINVAL) or PRS_ENOMEM. */
int prs_synth_profile(const prs_synth_opts *o, prs_profile **out, prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
