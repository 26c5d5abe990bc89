/* A profile's rows ordered by computation type (stage, instruction), then ascending clock, for
 * the code that works on one type's rows at a time: the reconciliation (reconcile.c) and the
 * shape oracle (noise_oracle.c). Module prefix prs__type_rows. Inline: a few lines each. */
#ifndef PRS_TYPE_ROWS_H
#define PRS_TYPE_ROWS_H

#include <stddef.h>
#include <stdlib.h>

#include "perseus/profile.h"

/* Where a row stands: its type and clock, and its index in the profile's rows. */
typedef struct prs__type_row {
    int stage, instr, freq_mhz;
    size_t row;
} prs__type_row;

/* By type (stage, instruction), then ascending clock. */
static inline int prs__type_rows_cmp(const void *a, const void *b)
{
    const prs__type_row *x = a, *y = b;
    if (x->stage != y->stage) return (x->stage > y->stage) - (x->stage < y->stage);
    if (x->instr != y->instr) return (x->instr > y->instr) - (x->instr < y->instr);
    return (x->freq_mhz > y->freq_mhz) - (x->freq_mhz < y->freq_mhz);
}

/* rows[0..n) into idx[0..n), sorted by type, then ascending clock. */
static inline void prs__type_rows_sort(const prs_profile_row *rows, size_t n, prs__type_row *idx)
{
    for (size_t i = 0; i < n; i++)
        idx[i] = (prs__type_row){rows[i].stage, (int)rows[i].instr, rows[i].freq_mhz, i};
    qsort(idx, n, sizeof *idx, prs__type_rows_cmp);
}

#endif
