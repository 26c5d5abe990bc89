/* The performance backend (perf.h) of the synthetic roofline model itself (roofline_perf.c), at
 * any clock of the GPU's range and any TP degree its memory allows: the very figures the fake
 * serving instance (perseus-fakeserve) runs on, so that an emulation through this backend
 * predicts a live replay on fakes with nothing between them but the host's timing. */
#ifndef PRS_INFER_ROOFLINE_PERF_H
#define PRS_INFER_ROOFLINE_PERF_H

#include "perf.h"
#include "roofline.h"

#define PRS_INFER_ROOFLINE_PERF_MAX_CLOCKS 256
#define PRS_INFER_ROOFLINE_PERF_MAX_TPS 7 /* 1, 2, 4, ..., 64 */

typedef struct prs_infer_roofline_perf {
    prs_infer_roofline model;
    int max_batch; /* the engine's largest batch (a fake's --max-running) */
    int clocks[PRS_INFER_ROOFLINE_PERF_MAX_CLOCKS], nclk;
    int tps[PRS_INFER_ROOFLINE_PERF_MAX_TPS], ntp;
} prs_infer_roofline_perf;

/* Fill rp for model with engines of at most max_batch sequences; the clocks listed are the GPU's
 * range in step_mhz steps (its highest included), the TP degrees the powers of two whose memory
 * holds the weights. PRS_EINVAL when max_batch < 1 or step_mhz < 1. out's ctx points at rp,
 * which must outlive it. */
int prs_infer_roofline_perf_init(prs_infer_roofline_perf *rp, const prs_infer_roofline *model,
                                 int max_batch, int step_mhz, prs_infer_perf *out, prs_error *err);

#endif
