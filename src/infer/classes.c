/* Request classes and SLOs (classes.h): the classification every pool, router and statistic
 * shares, so a request is counted in the same class wherever it is seen. */
#include "classes.h"

void prs_infer_classes_default(prs_infer_classes *c)
{
    *c = (prs_infer_classes){.in_limit = {256, 1024},
                             .out_limit = {100, 350},
                             .ttft_slo_s = {0.25, 0.5, 1.5},
                             .tbt_slo_s = 0.1,
                             .quantile = 0.99};
}

int prs_infer_classes_check(const prs_infer_classes *c, prs_error *err)
{
    if (c->in_limit[0] < 1 || c->in_limit[1] <= c->in_limit[0])
        return prs_error_set(err, PRS_EINVAL, "input class limits must be 1 <= A < B (got %d,%d)",
                             c->in_limit[0], c->in_limit[1]);
    if (c->out_limit[0] < 1 || c->out_limit[1] <= c->out_limit[0])
        return prs_error_set(err, PRS_EINVAL, "output class limits must be 1 <= A < B (got %d,%d)",
                             c->out_limit[0], c->out_limit[1]);
    for (int i = 0; i < 3; i++)
        if (!(c->ttft_slo_s[i] > 0))
            return prs_error_set(err, PRS_EINVAL, "TTFT SLO of input class %d must be > 0", i);
    if (!(c->tbt_slo_s > 0)) return prs_error_set(err, PRS_EINVAL, "TBT SLO must be > 0");
    if (!(c->quantile > 0 && c->quantile < 1))
        return prs_error_set(err, PRS_EINVAL, "SLO quantile must be in (0, 1)");
    return PRS_OK;
}

int prs_infer_class_of(const prs_infer_classes *c, int in_tokens, int out_tokens)
{
    int i = in_tokens < c->in_limit[0] ? 0 : in_tokens < c->in_limit[1] ? 1 : 2;
    int o = out_tokens < c->out_limit[0] ? 0 : out_tokens < c->out_limit[1] ? 1 : 2;
    return i * 3 + o;
}

const char *prs_infer_class_name(int klass)
{
    static const char *const names[] = {"SS", "SM", "SL", "MS", "MM",
                                        "ML", "LS", "LM", "LL", "all"};
    return klass >= 0 && klass <= PRS_INFER_ALL ? names[klass] : "?";
}
