/* Phase-level inference profiles: one CSV file that describes one model served on one GPU type,
 * measured (or synthesised) per tensor-parallel degree and SM clock, and the performance backend
 * (perf.h) that answers from it by interpolation. The format is documented in docs/inference.md,
 * section "Profiles"; in short, the header is
 *
 *   model,gpu,tp,freq_mhz,phase,batch,tokens,time_s,energy_j
 *
 * (columns in any order) and each row is one of
 *   prefill   one prefill of `batch` prompts of `tokens` tokens each: its time and energy;
 *   decode    one decode step of `batch` sequences at context `tokens` each: its time and energy;
 *   idle      batch 0, tokens 0: energy_j drawn over a window of time_s with no request (the idle
 *             power is their ratio);
 *   capacity  freq_mhz 0, time_s 0, energy_j 0: at this tp the engine holds `tokens` tokens of KV
 *             cache and runs at most `batch` sequences at once.
 * Energies cover all tp GPUs of the instance. Lines whose first character is '#' are comments.
 *
 * Rules checked on loading (every violation is an error naming file:line, or the file and the
 * (tp, clock, phase) at fault): one model and one GPU per file; no duplicate (tp, freq_mhz,
 * phase, batch, tokens); every tp has one capacity row and the same set of clocks; every
 * (tp, clock) has an idle row and prefill and decode rows that form a full grid (every measured
 * batch at every measured tokens value); the capacity's batch is no larger than the largest
 * measured batch of either phase at that tp; values finite, non-negative and within
 * perseus/limits.h's bounds (PRS_INFER_PROFILE_*); at most PRS_INFER_PROFILE_MAX_BYTES per file
 * and PRS_INFER_PROFILE_MAX_LINE per line.
 *
 * Queries (prefill and decode callbacks of the backend): exact tp and clock only (no
 * interpolation across clocks or TP degrees); the batch must lie within the measured batches;
 * the tokens per sequence (the iteration's tokens / n_seqs) are clamped up to the smallest
 * measured value and extrapolated along the last measured segment (slope at least 0) up to
 * PRS_INFER_PROFILE_MAX_EXTRAP times the largest; in between, bilinear interpolation over
 * (batch, tokens), which is exact for costs of the form a + b·batch + c·tokens + d·batch·tokens. */
#ifndef PRS_INFER_PROFILE_H
#define PRS_INFER_PROFILE_H

#include <stddef.h>

#include "perf.h"
#include "perseus/error.h"

typedef struct prs_infer_profile prs_infer_profile;

/* Read and check the profile CSV at path; *out gets a new profile (free it with
 * prs_infer_profile_free), or NULL on failure. PRS_EIO when the file cannot be read, PRS_EPARSE
 * on any malformed or inconsistent content. */
int prs_infer_profile_load(const char *path, prs_infer_profile **out, prs_error *err);
/* Parse from memory (text need not be NUL-terminated); name is used in error messages
 * ("file:line: ..."); NULL means "<memory>". */
int prs_infer_profile_parse(const char *text, size_t len, const char *name, prs_infer_profile **out,
                            prs_error *err);
void prs_infer_profile_free(prs_infer_profile *p);

/* The prs_infer_perf backend view (perf.h) of a loaded profile; valid while p lives. */
void prs_infer_profile_perf(const prs_infer_profile *p, prs_infer_perf *out);

/* The model and GPU names of the file (pointers into p, valid while p lives). */
const char *prs_infer_profile_model(const prs_infer_profile *p);
const char *prs_infer_profile_gpu(const prs_infer_profile *p);

#endif
