/* Calibration of the synthetic inference model (roofline.h) on measured serving latencies in the
 * Splitwise measurement format: one row per run, columns model, hardware, prompt_size,
 * batch_size, token_size, prompt_time (ms, the prefill of the whole batch), token_time (ms, one
 * decode step, the mean over the run), e2e_time (ms), tensor_parallel, and power columns (read
 * and ignored). Runs of one configuration are reduced to cells (medians); power-capped hardware
 * ("...-pcap") is skipped, since the model has no power cap. docs/inference.md, "Calibration". */
#ifndef PRS_INFER_CALIB_H
#define PRS_INFER_CALIB_H

#include <stddef.h>

#include "perseus/error.h"
#include "perf.h"
#include "roofline.h"

/* One configuration: its medians over the runs, and the range of the runs' e2e times. */
typedef struct prs_infer_cell {
    const prs_infer_llm *llm;
    const prs_infer_gpu *gpu;
    int tp, prompt, batch, out_tokens, runs;
    double prefill_s, decode_s;  /* medians */
    double e2e_min_s, e2e_max_s; /* over the runs whose e2e is consistent (below) */
    int e2e_runs;                /* runs whose e2e_time is within PRS_INFER_E2E_SELF_TOL of
                                    their own prompt_time + (token_size - 1) token_time */
    int impossible;              /* the prefill time implies more than the GPUs' peak FLOP/s */
} prs_infer_cell;

/* A run is taken as having generated all token_size tokens (and so enters the e2e check) when
 * its own figures agree: e2e_time within this fraction of prompt_time + (token_size - 1)
 * token_time. Runs that stopped early fail it. */
#define PRS_INFER_E2E_SELF_TOL 0.05

/* Parse the measurement CSV text (name for messages) into cells (malloc'd array, free it),
 * sorted by model, GPU, tp, prompt, batch and token_size. Unknown models or hardware, bad numbers
 * and missing columns are errors naming the line; at most PRS_INFER_PROFILE_MAX_BYTES of text. */
int prs_infer_cells_parse(const char *text, size_t len, const char *name, prs_infer_cell **cells,
                          size_t *ncells, prs_error *err);

/* Fit the efficiencies and fixed costs of (m, g) on the cells of that pair that are not
 * impossible, least squares on the relative errors of prefill time and decode step time (the
 * step at the run's mean context, prompt + token_size / 2). With link non-NULL its all-reduce
 * constants are kept and only the rest fitted (a model measured at one TP degree cannot tell
 * them apart from the fixed costs); otherwise all are fitted. *out starts from start. */
int prs_infer_calib_fit(const prs_infer_llm *m, const prs_infer_gpu *g, const prs_infer_cell *cells,
                        size_t ncells, const prs_infer_calib *start, const prs_infer_calib *link,
                        prs_infer_calib *out, prs_error *err);

/* Where every fit starts (calib.c): plausible shares and small fixed costs, the same for every
 * model and GPU, so a fit depends on the measurements only. */
extern const prs_infer_calib prs_infer_calib_start;

/* The model's prefill time and decode step time (at the mean context) for a cell, seconds. */
void prs_infer_cell_model(const prs_infer_roofline *r, const prs_infer_cell *c, double *prefill_s,
                          double *decode_s);

/* One request batch served alone on a backend at (tp, mhz): a prefill of batch prompts of prompt
 * tokens, then out_tokens - 1 decode steps (the prefill yields the first output token), step i
 * at a context of prompt + i tokens per sequence. This is what a measured e2e_time is taken to
 * contain (no queueing, no tokenisation). Sums of time and energy. */
int prs_infer_run_batch(const prs_infer_perf *pf, int tp, int mhz, int batch, int prompt,
                        int out_tokens, double *time_s, double *energy_j, prs_error *err);

/* The model's errors over a set of cells (calib_eval.c). Relative errors |model / measured - 1|:
 * median and worst over the cells, for the prefill time and the decode step time; for e2e, over
 * the cells with consistent runs, the error of the cell's worst run, e2e computed through pf. */
typedef struct prs_infer_calib_err {
    int cells, excluded; /* cells used; cells left out as impossible */
    double prefill_med, prefill_worst, decode_med, decode_worst;
    int e2e_cells, e2e_runs;
    double e2e_med, e2e_worst;
} prs_infer_calib_err;

/* Over the cells of r's model and GPU at tp (0: every tp); e2e through the backend of r's
 * synthetic profile (infer_synth.h) at the GPU's f_max and the TP degrees of those cells. */
int prs_infer_calib_errors(const prs_infer_roofline *r, const prs_infer_cell *cells, size_t ncells,
                           int tp, prs_infer_calib_err *out, prs_error *err);

#endif
