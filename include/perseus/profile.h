/* Stage profiles: measured (time, energy) of one forward or backward computation of one pipeline
 * stage at one GPU SM clock. CSV format (docs/design.md, 'Data formats'): header naming the five
 * columns stage,instruction,frequency,time,energy in any order; one row per (stage, instruction,
 * clock); time in seconds and energy in joules of a single computation. Rows whose instruction is
 * "load" (written by the artifact's profiler) are accepted and ignored, as the reference does.
 * The parser also reads Zeus master's rank-level CSV, whose header adds rank, dp_rank, pp_rank and
 * tp_rank (one row per GPU rank): the rows of one (stage, instruction, clock) become one row, with
 * the longest time and the summed energy of the stage's ranks, at the group's first line; a rank
 * listed twice for one group, a stage whose ranks measured different clocks, a rank whose
 * coordinates change, two ranks at one coordinate and a stage on two pipeline positions are
 * errors naming the line. */
#ifndef PERSEUS_PROFILE_H
#define PERSEUS_PROFILE_H

#include "perseus/export.h"

#include <stdio.h>
#include "perseus/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum prs_instr { PRS_FORWARD = 0, PRS_BACKWARD = 1 } prs_instr;

/* One profile row: a value type. line is the 1-based CSV line it came from (0 if built in code). */
typedef struct prs_profile_row {
    int stage;
    prs_instr instr;
    int freq_mhz;
    double time_s;
    double energy_j;
    int line;
} prs_profile_row;

typedef struct prs_profile prs_profile;

/* "forward" / "backward". */
PRS_API const char *prs_instr_name(prs_instr instr);

/* Empty profile to fill with prs_profile_add. Free with prs_profile_free. */
PRS_API prs_profile *prs_profile_new(void);
PRS_API void prs_profile_free(prs_profile *p);

/* Append a row after validating it (0 <= stage <= 1000000, clock > 0, time and energy finite and
 * > 0, no duplicate (stage, instruction, clock)). PRS_EPARSE with "NAME: problem" ("NAME:LINE: ..."
 * when row->line > 0) on a bad row; the profile is then unchanged. */
PRS_API int prs_profile_add(prs_profile *p, const prs_profile_row *row, prs_error *err);

/* Parse CSV text. name is used in messages ("NAME:LINE: problem"; NULL means "<memory>"); text
 * holds len bytes and need not be NUL-terminated. On success *out owns a new profile; on failure
 * *out is NULL, the result is PRS_EPARSE (PRS_ENOMEM, PRS_EINVAL for NULL arguments) and err names
 * the line and problem. An input without a single forward or backward row is an error. */
PRS_API int prs_profile_parse(const char *name, const char *text, size_t len, prs_profile **out,
                              prs_error *err);
/* Read and parse a CSV file (name in messages = path); PRS_EIO if it cannot be read. */
PRS_API int prs_profile_load(const char *path, prs_profile **out, prs_error *err);

/* Write as CSV (header + rows in insertion order, shortest round-trip numbers); PRS_EIO on a
 * write error. */
PRS_API int prs_profile_write_csv(const prs_profile *p, FILE *f);

PRS_API size_t prs_profile_nrows(const prs_profile *p);
/* Rows in insertion order; valid until the next prs_profile_add or prs_profile_free. */
PRS_API const prs_profile_row *prs_profile_rows(const prs_profile *p);
/* Largest stage index present + 1 (0 for an empty profile). */
PRS_API int prs_profile_num_stages(const prs_profile *p);
/* Check that stages 0..stages-1 each have forward and backward rows; PRS_EPARSE with a message
 * naming the first missing (stage, instruction), e.g. "NAME: stage 3 has no backward rows". */
PRS_API int prs_profile_check_stages(const prs_profile *p, int stages, prs_error *err);
/* Name the profile was parsed or loaded from ("<memory>" otherwise). */
PRS_API const char *prs_profile_name(const prs_profile *p);

#ifdef __cplusplus
}
#endif
#endif
