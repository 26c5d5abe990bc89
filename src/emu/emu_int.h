/* Internal interfaces of the emulator: per-plan sums over the measured profile figures (read
 * through the core's evaluation context, perseus/evaluate.h). Module prefix prs__emu_. */
#ifndef PRS_EMU_INT_H
#define PRS_EMU_INT_H

#include "perseus/emulator.h"

/* Record an error and evaluate to its code: prs_error_set's result, visibly non-zero to static
 * analysis (which cannot see into error.c). */
#define prs__emu_error(err, code, ...) (prs_error_set((err), (code), __VA_ARGS__), (code))

/* PRS_EINVAL unless pipelines >= 1, tp >= 1 and pipelines x stages x tp <= PRS_MAX_JOB_GPUS
 * (stages >= 1 checked elsewhere). */
int prs__emu_check_job(int pipelines, int stages, int tp, prs_error *err);

/* Sum of measured energies and of measured times of a plan's computations. PRS_EINVAL (message
 * naming the computation) if a clock is not profiled. */
int prs__emu_plan_sums(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                       double *sum_energy_j, double *sum_time_s, prs_error *err);

#endif
