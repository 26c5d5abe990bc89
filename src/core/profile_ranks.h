/* Rank-level profiles (Zeus master's 9-column CSV): one row per GPU rank, combined into one row
 * per (stage, instruction, clock) the way Zeus combines a stage's ranks. Internal to the profile
 * reader (profile.c). */
#ifndef PRS_CORE_PROFILE_RANKS_H
#define PRS_CORE_PROFILE_RANKS_H

#include <stddef.h>

#include "perseus/error.h"
#include "perseus/profile.h"

/* One parsed row of a rank-level profile; line is its 1-based CSV line. */
typedef struct prs__rank_row {
    int rank, dp_rank, pp_rank, tp_rank;
    int stage;
    prs_instr instr;
    int freq_mhz;
    double time_s, energy_j;
    int line;
} prs__rank_row;

/* Check rows[0..n) for consistency and add one combined row per (stage, instruction, clock) to p:
 * time the longest of the stage's ranks, energy their sum, line the group's first line; groups in
 * the order of their first line. Refused, with "NAME:LINE: problem": a rank whose dp/pp/tp
 * coordinates change between rows, two ranks with the same coordinates, a stage on two pipeline
 * positions (pp_rank), a rank with two rows for one (stage, instruction, clock), and a stage whose
 * ranks did not all measure the same clocks. rows[] is reordered. */
int prs__profile_combine_ranks(prs_profile *p, const char *name, prs__rank_row *rows, size_t n,
                               prs_error *err);

#endif
