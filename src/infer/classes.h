/* Request classes and latency SLOs (DynamoLLM's 3 input x 3 output length classes).
 *
 * A class index is in_class * 3 + out_class, 0 (SS) .. 8 (LL); PRS_INFER_NCLASS + 0 is used by
 * the statistics as "all requests". Thresholds and SLOs are options (defaults from the paper:
 * input < 256 / < 1024 / longer, output < 100 / < 350 / longer; P99 TTFT 0.25 / 0.5 / 1.5 s by
 * input class, TBT 0.1 s). */
#ifndef PRS_INFER_CLASSES_H
#define PRS_INFER_CLASSES_H

#include "perseus/error.h"

#define PRS_INFER_NCLASS 9
#define PRS_INFER_ALL PRS_INFER_NCLASS /* the statistics' index of every class together */

typedef struct prs_infer_classes {
    int in_limit[2];      /* input class 0: in < in_limit[0]; 1: < in_limit[1]; 2: the rest */
    int out_limit[2];     /* the same for output tokens */
    double ttft_slo_s[3]; /* P99 time to first token, by input class */
    double tbt_slo_s;     /* P99 time between tokens */
    double quantile;      /* the SLO percentile, 0.99 */
} prs_infer_classes;

void prs_infer_classes_default(prs_infer_classes *c);
/* PRS_EINVAL with the field named when thresholds are not increasing and positive, or an SLO
 * not > 0. */
int prs_infer_classes_check(const prs_infer_classes *c, prs_error *err);
int prs_infer_class_of(const prs_infer_classes *c, int in_tokens, int out_tokens);
/* "SS", "SM", ... "LL" for 0..8, "all" for PRS_INFER_ALL. */
const char *prs_infer_class_name(int klass);

#endif
