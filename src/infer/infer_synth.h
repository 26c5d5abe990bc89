/* A synthetic inference profile (profile.h's CSV format) from the roofline model (roofline.h):
 * what `perseus infer synth` writes. */
#ifndef PRS_INFER_SYNTH_H
#define PRS_INFER_SYNTH_H

#include <stddef.h>

#include "perseus/error.h"
#include "roofline.h"

/* The profile of r at every tp of tps[ntp] and clock of mhz[nclk] as CSV text: *text is
 * malloc'd (free it), *len its length. The grids: batch 1, 2, 4, ... PRS_INFER_MAX_SEQS and
 * tokens 16, 32, ... PRS_INFER_SYNTH_MAX_TOKENS for both phases; an idle row per (tp, clock)
 * over one second; a capacity row per tp (PRS_INFER_MAX_SEQS sequences, the model's KV tokens).
 * PRS_EINVAL when a tp leaves no room for the weights or repeats, a clock is outside the GPU's
 * f_min..f_max or repeats, or a list is empty. */
#define PRS_INFER_SYNTH_MAX_TOKENS 16384
int prs_infer_synth_csv(const prs_infer_roofline *r, const int *tps, int ntp, const int *mhz,
                        int nclk, char **text, size_t *len, prs_error *err);

#endif
