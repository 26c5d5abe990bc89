/* Inside an inference profile (profile.h): the tables the loader builds (profile.c) and the
 * interpolation answers from (profile_perf.c). */
#ifndef PRS_INFER_PROFILE_INT_H
#define PRS_INFER_PROFILE_INT_H

#include "perseus/limits.h"
#include "profile.h"

enum { PRS__INFER_PREFILL, PRS__INFER_DECODE, PRS__INFER_IDLE, PRS__INFER_CAPACITY };

/* The measured grid of one phase at one (tp, clock): batch[nb] and tokens[ns] ascending,
 * time_s and energy_j row-major, [ib * ns + is]. */
typedef struct prs__infer_grid {
    int nb, ns;
    int *batch;
    long *tokens;
    double *time_s, *energy_j;
} prs__infer_grid;

/* One (tp, clock): the prefill and decode grids and the idle power. */
typedef struct prs__infer_point {
    prs__infer_grid phase[2]; /* PRS__INFER_PREFILL, PRS__INFER_DECODE */
    double idle_power_w;
} prs__infer_point;

struct prs_infer_profile {
    char model[PRS_INFER_NAME_MAX], gpu[PRS_INFER_NAME_MAX];
    int ntp, nclk;
    int *tps, *clocks;     /* ascending */
    long *kv_tokens;       /* [ntp] */
    int *max_batch;        /* [ntp] */
    prs__infer_point *pts; /* [itp * nclk + iclk] */
};

/* One row of the CSV as read (profile.c), before the tables are built (profile_build.c). */
typedef struct prs__infer_row {
    int line, tp, freq_mhz, phase, batch;
    long tokens;
    double time_s, energy_j;
} prs__infer_row;

/* Build p's tables from rows (sorted in place); name is the file's, for messages. */
int prs__infer_profile_build(const char *name, prs__infer_row *rows, size_t nrows,
                             prs_infer_profile *p, prs_error *err);

/* Name of a phase constant ("prefill", ...). */
const char *prs__infer_phase_name(int phase);

/* Interpolate grid g at batch and tokens per sequence (profile.h's rules); what names the grid
 * in messages ("tp 4 at 1980 MHz, prefill"). PRS_ERANGE outside what can be answered. */
int prs__infer_grid_eval(const prs__infer_grid *g, int batch, double tokens, const char *what,
                         double *time_s, double *energy_j, prs_error *err);

#endif
