/* Synthetic inference profiles (infer_synth.h): the roofline model sampled on the grid the
 * profile format interpolates, written as the CSV an operator's measurement would be, into
 * memory (open_memstream), so callers parse it back without a file. */
#include <stdio.h>
#include <stdlib.h>

#include "infer_synth.h"
#include "perseus/limits.h"

static int check_lists(const prs_infer_roofline *r, const int *tps, int ntp, const int *mhz,
                       int nclk, prs_error *err)
{
    if (ntp < 1 || nclk < 1)
        return prs_error_set(err, PRS_EINVAL, "synthetic profile: no TP degree or no clock");
    for (int i = 0; i < ntp; i++) {
        long kv;
        if (tps[i] < 1 || tps[i] > PRS_INFER_MAX_TP)
            return prs_error_set(err, PRS_EINVAL, "tp %d outside 1..%d", tps[i], PRS_INFER_MAX_TP);
        for (int j = 0; j < i; j++)
            if (tps[j] == tps[i])
                return prs_error_set(err, PRS_EINVAL, "tp %d given twice", tps[i]);
        int rc = prs_infer_roofline_kv_tokens(r, tps[i], &kv, err);
        if (rc != PRS_OK) return rc;
    }
    const prs_infer_gpu *g = r->gpu;
    for (int i = 0; i < nclk; i++) {
        if (mhz[i] < g->f_min_mhz || mhz[i] > g->f_max_mhz)
            return prs_error_set(err, PRS_EINVAL, "clock %d MHz outside %s's %d..%d MHz", mhz[i],
                                 g->name, g->f_min_mhz, g->f_max_mhz);
        for (int j = 0; j < i; j++)
            if (mhz[j] == mhz[i])
                return prs_error_set(err, PRS_EINVAL, "clock %d MHz given twice", mhz[i]);
    }
    return PRS_OK;
}

static void write_point(FILE *f, const prs_infer_roofline *r, int tp, int mhz)
{
    const char *m = r->llm->name, *g = r->gpu->name;
    for (int ph = 0; ph < 2; ph++)
        for (int b = 1; b <= PRS_INFER_MAX_SEQS; b *= 2)
            for (long s = 16; s <= PRS_INFER_SYNTH_MAX_TOKENS; s *= 2) {
                double t, e;
                if (ph == 0)
                    prs_infer_roofline_prefill(r, tp, mhz, b, (double)s, &t, &e);
                else
                    prs_infer_roofline_decode(r, tp, mhz, b, (double)s, &t, &e);
                fprintf(f, "%s,%s,%d,%d,%s,%d,%ld,%.9g,%.9g\n", m, g, tp, mhz,
                        ph == 0 ? "prefill" : "decode", b, s, t, e);
            }
    fprintf(f, "%s,%s,%d,%d,idle,0,0,1,%.9g\n", m, g, tp, mhz, prs_infer_roofline_idle_w(r, tp));
}

int prs_infer_synth_csv(const prs_infer_roofline *r, const int *tps, int ntp, const int *mhz,
                        int nclk, char **text, size_t *len, prs_error *err)
{
    *text = NULL;
    *len = 0;
    int rc = check_lists(r, tps, ntp, mhz, nclk, err);
    if (rc != PRS_OK) return rc;
    FILE *f = open_memstream(text, len);
    if (!f) return prs_error_set(err, PRS_ENOMEM, "synthetic profile: out of memory");
    fprintf(f,
            "# synthetic profile: %s on %s, roofline model calibrated on measurements at the "
            "default clock (perseus infer synth)\n"
            "model,gpu,tp,freq_mhz,phase,batch,tokens,time_s,energy_j\n",
            r->llm->name, r->gpu->name);
    for (int i = 0; i < ntp; i++) {
        long kv = 0;
        prs_infer_roofline_kv_tokens(r, tps[i], &kv, NULL);
        fprintf(f, "%s,%s,%d,0,capacity,%d,%ld,0,0\n", r->llm->name, r->gpu->name, tps[i],
                PRS_INFER_MAX_SEQS, kv);
        for (int k = 0; k < nclk; k++)
            write_point(f, r, tps[i], mhz[k]);
    }
    if (ferror(f) | fclose(f)) {
        free(*text);
        *text = NULL;
        *len = 0;
        return prs_error_set(err, PRS_ENOMEM, "synthetic profile: out of memory");
    }
    return PRS_OK;
}
