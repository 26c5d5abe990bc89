/* Internal interfaces of the emulator: the measured (unquantized) profile figures of every
 * computation type, and per-plan sums over them. Module prefix prsU_. */
#ifndef PRS_EMU_INT_H
#define PRS_EMU_INT_H

#include "perseus/emulator.h"

/* Record an error and evaluate to its code: prs_error_set's result, visibly non-zero to static
 * analysis (which cannot see into error.c). */
#define prsU_error(err, code, ...) (prs_error_set((err), (code), __VA_ARGS__), (code))

/* Measured (time, energy) of every profiled clock of every computation type of a pipeline.
 * Type k = chunk * 2 + instruction, as the core numbers them (plan_int.h). */
typedef struct prsU_table {
    int ntypes;     /* chunks * 2 */
    int *start;     /* per type: first entry; start[ntypes] = total */
    int *freq;      /* ascending within a type */
    double *time_s; /* measured, unquantized */
    double *energy_j;
} prsU_table;

int prsU_build(const prs_profile *p, const prs_pipeline *pipe, prsU_table *t, prs_error *err);
void prsU_free(prsU_table *t);
/* Index of (type, freq), or -1 if that clock was not profiled. */
int prsU_find(const prsU_table *t, int type, int freq_mhz);

/* Sum of measured energies and of measured times of a plan's computations. PRS_EINVAL (message
 * naming the computation) if a clock is not profiled. */
int prsU_plan_sums(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                   double *sum_energy_j, double *sum_time_s, prs_error *err);

#endif
