/* Synthetic stage profiles: a profile generated from the GPU model (perseus/gpumodel.h) instead
 * of measured, for tests, demos and the paper's emulation. Implemented by the planner core
 * (src/core/synth.c, library perseus_core), which uses the model's pure functions
 * (perseus_gpumodel); the GPU backends (perseus_gpu) do not depend on it. */
#ifndef PERSEUS_SYNTH_H
#define PERSEUS_SYNTH_H

#include "perseus/export.h"

#include <stdint.h>

#include "perseus/error.h"
#include "perseus/gpumodel.h"
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    /* Irregular clocks (docs/planner.md, 'Irregular profiles'): non-zero makes each (stage,
     * instruction) curve irregular, as measured profiles of some GPUs are: below a jump clock
     * f_j (about PRS_SYNTH_JUMP_MHZ under the top of a band) power drops by 4-8 % and time grows
     * less than the model says, while the clocks of the band above f_j keep the band top's power
     * (so energy rises as their clock falls); every row's energy then gets a wiggle of up to
     * PRS_SYNTH_WIGGLE of either sign. f_j, the drop and the wiggles come from the seed (a
     * stream of their own, independent of the noise's). The clock f_j is then only slightly
     * slower than the band's top but markedly cheaper, a trade the convex hull misses. */
    int irregular;
} prs_synth_opts;

/* The width of the band above an irregular profile's jump clock, MHz (prs_synth_opts). */
#define PRS_SYNTH_JUMP_MHZ 210
/* The largest relative energy wiggle of an irregular profile's rows. */
#define PRS_SYNTH_WIGGLE 0.004

/* Defaults: a100, 1 stage, preset clock range and work, default imbalance, no noise, seed 0. */
PRS_API void prs_synth_opts_init(prs_synth_opts *o);

/* Build a profile: for each stage, for each clock from highest to lowest, a forward then a
 * backward row (the order of the artifact's profiles). Deterministic for given options. On
 * success *out owns a new profile (free with prs_profile_free); on failure *out is NULL and err
 * names the offending option (PRS_EINVAL) or PRS_ENOMEM. */
PRS_API int prs_synth_profile(const prs_synth_opts *o, prs_profile **out, prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
