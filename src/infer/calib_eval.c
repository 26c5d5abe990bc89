/* How well the synthetic inference model reproduces measurements (calib.h): per-cell relative
 * errors of prefill and decode step times, and of whole request batches (e2e) run through a
 * performance backend, summarised as medians and worst cases. */
#include <math.h>
#include <stdlib.h>

#include "calib.h"
#include "infer_synth.h"
#include "perseus/limits.h"
#include "profile.h"

int prs_infer_run_batch(const prs_infer_perf *pf, int tp, int mhz, int batch, int prompt,
                        int out_tokens, double *time_s, double *energy_j, prs_error *err)
{
    prs_infer_prefill pre = {.n_seqs = batch, .tokens = (long)batch * prompt};
    double t, e;
    int rc = pf->prefill(pf->ctx, tp, mhz, &pre, &t, &e, err);
    if (rc != PRS_OK) return rc;
    *time_s = t;
    *energy_j = e;
    for (int i = 1; i < out_tokens; i++) {
        prs_infer_decode dec = {.n_seqs = batch, .ctx_tokens = (long)batch * (prompt + i)};
        rc = pf->decode(pf->ctx, tp, mhz, &dec, &t, &e, err);
        if (rc != PRS_OK) return rc;
        *time_s += t;
        *energy_j += e;
    }
    return PRS_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n == 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double worst(const double *v, int n)
{
    double w = n ? 0 : NAN;
    for (int i = 0; i < n; i++)
        if (v[i] > w) w = v[i];
    return w;
}

static double rel(double model, double measured)
{
    return fabs(model / measured - 1.0);
}

/* The cell's e2e error (its worst consistent run). */
static int e2e_error(const prs_infer_perf *pf, const prs_infer_roofline *r, const prs_infer_cell *c,
                     double *out, prs_error *err)
{
    double t, e;
    int rc = prs_infer_run_batch(pf, c->tp, r->gpu->f_max_mhz, c->batch, c->prompt, c->out_tokens,
                                 &t, &e, err);
    if (rc != PRS_OK) return rc;
    double a = rel(t, c->e2e_min_s), b = rel(t, c->e2e_max_s);
    *out = a > b ? a : b;
    return PRS_OK;
}

static int errors(const prs_infer_roofline *r, const prs_infer_perf *pf,
                  const prs_infer_cell *cells, size_t ncells, int tp, prs_infer_calib_err *out,
                  prs_error *err)
{
    *out = (prs_infer_calib_err){0};
    double *v = calloc(3 * ncells + 1, sizeof *v);
    if (!v) return prs_error_set(err, PRS_ENOMEM, "calibration: out of memory");
    double *pre = v, *dec = v + ncells, *e2e = v + 2 * ncells;
    int rc = PRS_OK;
    for (size_t i = 0; i < ncells && rc == PRS_OK; i++) {
        const prs_infer_cell *c = &cells[i];
        if (c->llm != r->llm || c->gpu != r->gpu || (tp && c->tp != tp)) continue;
        if (c->impossible) {
            out->excluded++;
            continue;
        }
        double tpre, tdec;
        prs_infer_cell_model(r, c, &tpre, &tdec);
        pre[out->cells] = rel(tpre, c->prefill_s);
        dec[out->cells++] = rel(tdec, c->decode_s);
        if (c->e2e_runs == 0) continue;
        rc = e2e_error(pf, r, c, &e2e[out->e2e_cells], err);
        out->e2e_cells++;
        out->e2e_runs += c->e2e_runs;
    }
    if (rc == PRS_OK) {
        out->prefill_worst = worst(pre, out->cells);
        out->prefill_med = median(pre, out->cells);
        out->decode_worst = worst(dec, out->cells);
        out->decode_med = median(dec, out->cells);
        out->e2e_worst = worst(e2e, out->e2e_cells);
        out->e2e_med = median(e2e, out->e2e_cells);
    }
    free(v);
    return rc;
}

int prs_infer_calib_errors(const prs_infer_roofline *r, const prs_infer_cell *cells, size_t ncells,
                           int tp, prs_infer_calib_err *out, prs_error *err)
{
    int tps[PRS_INFER_MAX_TP], ntp = 0, mhz = r->gpu->f_max_mhz;
    for (int p = 1; p <= PRS_INFER_MAX_TP; p++)
        for (size_t i = 0; i < ncells; i++)
            if (cells[i].llm == r->llm && cells[i].gpu == r->gpu && cells[i].tp == p) {
                tps[ntp++] = p;
                break;
            }
    *out = (prs_infer_calib_err){0};
    if (ntp == 0) return PRS_OK;
    char *text = NULL;
    size_t len = 0;
    prs_infer_profile *prof = NULL;
    int rc = prs_infer_synth_csv(r, tps, ntp, &mhz, 1, &text, &len, err);
    if (rc == PRS_OK) rc = prs_infer_profile_parse(text, len, "synthetic profile", &prof, err);
    if (rc == PRS_OK) {
        prs_infer_perf pf;
        prs_infer_profile_perf(prof, &pf);
        rc = errors(r, &pf, cells, ncells, tp, out, err);
    }
    prs_infer_profile_free(prof);
    free(text);
    return rc;
}
