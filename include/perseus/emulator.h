/* The emulator: what Perseus saves at scale, compared with what a job does today.
 *
 * Three baselines are planners here, not copied numbers: all computations at the highest
 * profiled clock (all-max), one uniform clock for every computation, and an EnvPipe-style plan
 * (the last stage is assumed critical; every other stage is slowed down as long as the iteration
 * does not get longer). Every plan is judged with the core's exact evaluation
 * (prs_evaluate_plan).
 *
 * On top of them, the paper's large-scale emulation (SOSP'24 Table 6 and Figures 7-8;
 * docs/emulator.md): N data-parallel pipelines of `stages` GPUs, each GPU one rank of a
 * `tp`-way tensor-parallel group, one pipeline straggling at T' = s * T. Energies handed in are
 * per GPU of a tensor-parallel group (as the frontier reports them); absolute energies handed
 * back are per pipeline (times tp) or per job. Every metric is a ratio of such energies, so tp
 * changes absolute figures only, never a percentage. docs/emulator.md explains the recipe, its
 * quirks and the variants. */
#ifndef PERSEUS_EMULATOR_H
#define PERSEUS_EMULATOR_H

#include "perseus/export.h"

#include <stddef.h>

#include "perseus/error.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Baselines (plans: stages * prs_ops_per_stage entries, stage-major, as in planner.h) ---- */

/* All-max: every computation at the highest clock profiled for its (model chunk, instruction).
 * PRS_EINVAL if the pipeline is invalid; PRS_EPARSE if the profile lacks a stage it needs. */
PRS_API int prs_baseline_allmax(const prs_profile *profile, const prs_pipeline *pipe,
                                int *clocks_mhz, prs_error *err);

/* A uniform-clock plan (every computation at freq_mhz), evaluated. */
typedef struct prs_uniform_point {
    int freq_mhz;
    double time_s;   /* evaluated iteration time */
    double energy_j; /* evaluated iteration energy (per GPU of a TP group) */
} prs_uniform_point;

/* Evaluate every clock profiled for every (model chunk, instruction) the pipeline runs, as a
 * uniform plan, in ascending clock order. Clocks missing for some computation type are skipped
 * (a uniform plan cannot use them); PRS_EINVAL if no clock is common to all types. On success
 * *out is malloc'ed (free with free()) and holds *n points. */
PRS_API int prs_uniform_sweep(const prs_profile *profile, const prs_pipeline *pipe,
                              prs_uniform_point **out, size_t *n, prs_error *err);

/* Among pts[0..n), the least-energy point whose time is <= target_time_s (+1e-9 s); ties go to
 * the faster, then the higher clock. PRS_ERANGE if no point meets the target. */
PRS_API int prs_uniform_pick(const prs_uniform_point *pts, size_t n, double target_time_s,
                             size_t *k);

/* The uniform-clock baseline: the single clock, used for every computation, of least evaluated
 * energy among those whose evaluated iteration time meets target_time_s. target_time_s <= 0
 * means "no slower than all-max" (the all-max plan's evaluated time). Writes the plan into
 * clocks_mhz when non-NULL and its figures into *pt. PRS_ERANGE (message naming the fastest
 * uniform time) if no uniform clock meets the target; PRS_EINVAL if no clock is profiled for
 * every computation type. */
PRS_API int prs_baseline_uniform(const prs_profile *profile, const prs_pipeline *pipe,
                                 double target_time_s, int *clocks_mhz, prs_uniform_point *pt,
                                 prs_error *err);

/* EnvPipe-style baseline. Start from all-max (iteration time T0). The last GPU's computations
 * stay at all-max (that stage is assumed critical). Then, one pass over GPUs stages-2 down to
 * 0, each GPU's computations in execution order: give the computation the profiled clock of
 * least effective energy (energy - P_block * quantized time: at a fixed iteration time that is
 * exactly its share of the iteration energy) among those whose quantized time exceeds its
 * current one by at most its total float (latest finish - earliest start - duration, from the
 * critical path method with the current clocks and T0). A computation delayed by no more than
 * its total float cannot lengthen the iteration, and its current clock always qualifies, so the
 * result evaluates to exactly T0 and never to more energy than all-max. */
PRS_API int prs_baseline_envpipe(const prs_profile *profile, const prs_pipeline *pipe,
                                 int *clocks_mhz, prs_error *err);

/* ---- The paper's metrics (docs/emulator.md, 'The recipe') ---- */

/* A data-parallel job. */
typedef struct prs_emu_job {
    int pipelines;           /* N >= 1 data-parallel pipelines */
    int stages;              /* pp: GPUs per pipeline and tensor-parallel rank */
    int tp;                  /* tensor-parallel degree >= 1: GPUs per stage */
    double blocking_power_w; /* per GPU, >= 0 */
} prs_emu_job;

/* A (time, energy) point: a frontier point, or a plan. */
typedef struct prs_emu_point {
    double time_s;
    double energy_j;
} prs_emu_point;

/* The paper's rule for the non-straggling pipelines: the least-energy point among those with
 * time <= t_prime_s (+1e-9 s); ties go to the faster point. PRS_ERANGE if every point is
 * slower. */
PRS_API int prs_emu_paper_rule(const prs_emu_point *pts, size_t n, double t_prime_s, size_t *k);

/* x rounded to 2 decimals as Python's round(x, 2) does (correctly rounded from the binary
 * value, ties to even): the artifact's tstar. */
PRS_API double prs_emu_round2(double x);

/* Per-GPU (one rank of a TP group) figures of one strategy at one straggler factor. */
typedef struct prs_emu_inputs {
    double base_time_s;     /* the baseline job's no-slowdown iteration time (paper: T_min) */
    double base_energy_j;   /* its pipeline's energy at that time (paper: E_base) */
    double time_s;          /* the strategy's no-slowdown time T0 (paper: T_min) */
    double energy_j;        /* the strategy's pipeline energy at T0 (paper, Perseus: E_intr) */
    double choice_time_s;   /* plan the non-stragglers run at T' = s * T0: its own time t* */
    double choice_energy_j; /* and its own energy e*, blocking until t* included */
} prs_emu_inputs;

/* The metrics of one strategy at one straggler factor. Percentages except tstar. */
typedef struct prs_emu_metrics {
    double s;                 /* straggler slowdown factor */
    double t_prime_s;         /* s * T0 */
    double choice_time_s;     /* t* */
    double choice_energy_j;   /* e* times tp, plus blocking until T' (one non-straggler) */
    double job_energy_j;      /* E_job of the strategy (all N pipelines, tp-scaled) */
    double job_base_energy_j; /* E_job_base */
    double job_intr_energy_j; /* E_job_intr: every pipeline on the no-slowdown plan */
    double saving;            /* 100 (1 - E_job / E_job_base) */
    double intrinsic_saving;  /* 100 (1 - E_job_intr / E_job_base) */
    double extrinsic_saving;  /* 100 (1 - E_job / E_job_intr) */
    double saving_pp;         /* 100 (1 - one non-straggler's energy / (E_base + B)) */
    double tstar;             /* round(t* / T0, 2) */
} prs_emu_metrics;

/* The straggler model (docs/emulator.md, 'The recipe'), with B = P_b tp pp (s - 1) base_time and
 * B0 = P_b tp pp (s - 1) T0:
 *   E_job_base = s E_base + (N-1)(E_base + B)
 *   E_job_intr = s E0 + (N-1)(E0 + B0)
 *   E_job      = s E0 + (N-1)(e* + P_b tp pp (T' - t*))
 * (energies times tp). With base_time = T0 = T_min this is exactly the paper's. PRS_EINVAL on
 * a bad job, s < 1, or a non-finite or non-positive time or energy. */
PRS_API int prs_emu_metrics_compute(const prs_emu_job *job, double s, const prs_emu_inputs *in,
                                    prs_emu_metrics *out, prs_error *err);

/* Table 6's intrinsic saving per pipeline, in percent: 100 (1 - energy / base_energy). */
PRS_API double prs_emu_intrinsic_saving(double energy_j, double base_energy_j);

/* Table 6's all-max baseline of one pipeline at iteration time time_s, per GPU: the measured
 * (unquantized) energy of every computation at all-max plus blocking power for the rest of
 * time_s on every GPU, sum(e) + P_b (stages * time_s - sum(t)). Generalises the recipe's
 * sum_stages [M (e_F + e_B) + P_b (T_min - M (t_F + t_B))] to every schedule. */
PRS_API int prs_emu_allmax_energy(const prs_profile *profile, const prs_pipeline *pipe,
                                  double time_s, double *energy_j, prs_error *err);

/* Same accounting for any plan: measured energies plus blocking until time_s, with measured
 * (unquantized) busy times. */
PRS_API int prs_emu_plan_energy_at(const prs_profile *profile, const prs_pipeline *pipe,
                                   const int *clocks_mhz, double time_s, double *energy_j,
                                   prs_error *err);

/* Straggler factors from text: comma- or space-separated items, each a number ("1.2") or an
 * inclusive range START:STOP:STEP ("1.01:1.50:0.01"; STOP is included when the steps reach it
 * to within a millionth of a step, and each value is rounded to the decimals written, so the
 * range gives 1.07, not 1.0700000000000003). Every factor must be >= 1. Appends to *vals
 * (malloc'ed, caller frees; *vals may be NULL and *n 0 to start). PRS_EINVAL with a message
 * naming the bad item; *vals and *n are then unchanged. At most 100000 factors in all. */
PRS_API int prs_straggler_parse(const char *spec, double **vals, size_t *n, prs_error *err);

/* ---- The emulation ---- */

/* Variants (docs/emulator.md):
 *   PAPER   the artifact's recipe: the frontier's predicted energies, T_min = its fastest
 *           planned time, the all-max baseline charged at T_min with measured times
 *           (E_base), non-stragglers on the least-energy point with t <= T';
 *   EXACT   every plan evaluated exactly (prs_evaluate_plan); the all-max baseline at its own
 *           critical path; each strategy's straggler slowed from its own no-slowdown time;
 *   LOOKUP  as EXACT, but non-stragglers follow prs_frontier_lookup (least energy including
 *           blocking until T'); Perseus only. */
typedef enum prs_emu_variant {
    PRS_EMU_PAPER = 0,
    PRS_EMU_EXACT = 1,
    PRS_EMU_LOOKUP = 2,
    PRS_EMU_NVARIANTS = 3
} prs_emu_variant;

typedef enum prs_emu_strategy {
    PRS_EMU_PERSEUS = 0,
    PRS_EMU_ALLMAX = 1,
    PRS_EMU_UNIFORM = 2,
    PRS_EMU_ENVPIPE = 3,
    PRS_EMU_NSTRATEGIES = 4
} prs_emu_strategy;

/* "paper", "exact", "lookup"; "perseus", "all-max", "uniform", "envpipe". */
PRS_API const char *prs_emu_variant_name(prs_emu_variant v);
PRS_API const char *prs_emu_strategy_name(prs_emu_strategy s);

typedef struct prs_emulate_opts {
    prs_plan_opts plan;       /* pipeline and cost model for prs_plan */
    int pipelines;            /* N >= 1 */
    int tp;                   /* >= 1 */
    const double *stragglers; /* factors >= 1; not owned, read during the call */
    size_t nstragglers;
} prs_emulate_opts;

/* One strategy in one variant. Energies per pipeline (tp-scaled). */
typedef struct prs_emu_summary {
    double base_time_s, base_energy_j; /* the variant's all-max reference */
    double time_s, energy_j;           /* the strategy's no-slowdown plan, as charged */
    int freq_mhz;                      /* uniform: its no-slowdown clock; 0 otherwise */
    double intrinsic_saving_pp;        /* percent */
    const prs_emu_metrics *rows;       /* one per straggler factor, in the order given */
    size_t nrows;
} prs_emu_summary;

/* Facts about the planned frontier and the baselines (per GPU, unscaled). */
typedef struct prs_emu_info {
    size_t frontier_points; /* as planned (the paper variant reads these) */
    size_t clean_points;    /* on the clean frontier (exact and lookup choose among these) */
    double t_min_s;         /* fastest planned time */
    double e_intr_j;        /* predicted energy there */
    double t_energy_min_s;  /* T*: time of the least predicted energy */
    double e_energy_min_j;
    double eval_t_min_s; /* the no-straggler lookup plan: evaluated time and energy */
    double eval_e_intr_j;
    double allmax_time_s; /* all-max evaluated critical path and energy */
    double allmax_energy_j;
    double envpipe_time_s, envpipe_energy_j;
    int uniform_freq_mhz; /* the no-slowdown uniform clock */
    double uniform_time_s, uniform_energy_j;
} prs_emu_info;

typedef struct prs_emulation prs_emulation;

/* Plan the pipeline with prs_plan, build the baselines and compute every variant. On success
 * *out owns the result (free with prs_emulation_free). Fails as prs_plan does, PRS_EINVAL on a
 * bad job or factor, PRS_ERANGE if the frontier is empty (nothing to emulate). */
PRS_API int prs_emulate(const prs_profile *profile, const prs_emulate_opts *o, prs_emulation **out,
                        prs_error *err);
/* Same with a frontier already planned for this profile; its pipeline is used (o->plan is
 * ignored). f is not owned and must outlive the result. */
PRS_API int prs_emulate_frontier(const prs_profile *profile, const prs_frontier *f,
                                 const prs_emulate_opts *o, prs_emulation **out, prs_error *err);
PRS_API void prs_emulation_free(prs_emulation *e);

/* NULL where a variant does not cover a strategy (LOOKUP covers Perseus only). Pointers are
 * valid until prs_emulation_free. */
PRS_API const prs_emu_summary *prs_emulation_get(const prs_emulation *e, prs_emu_variant v,
                                                 prs_emu_strategy s);
PRS_API const prs_emu_info *prs_emulation_info(const prs_emulation *e);
/* The frontier emulated (owned by the result when prs_emulate planned it). */
PRS_API const prs_frontier *prs_emulation_frontier(const prs_emulation *e);
PRS_API const prs_emu_job *prs_emulation_job(const prs_emulation *e);

#ifdef __cplusplus
}
#endif
#endif
