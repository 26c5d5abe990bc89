/* Calibration of the synthetic inference model (calib.h): the measurement CSV reduced to cells,
 * and a MINPACK least-squares fit (cminpack's lmdif, up to PRS_INFER_CALIB_MAXFEV evaluations) of
 * the model's efficiencies and fixed costs on them.
 *
 * The fit works on the logarithms of the constants, so they stay positive without bounds, and
 * on relative errors (model / measured - 1), so a 50 ms prefill weighs as much as a 5 s one.
 * Cells whose prefill time would need more than the GPUs' peak throughput are kept out (such a
 * time cannot be what the row says it is: the run was not the configuration it names). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cminpack.h>

#include "calib.h"
#include "csvfield.h"
#include "perseus/numfmt.h"
#include "perseus/limits.h"

enum { K_MODEL, K_HW, K_PROMPT, K_BATCH, K_OUT, K_PTIME, K_TTIME, K_E2E, K_TP, K_NCOLS };
static const char *const COLS[K_NCOLS] = {"model",      "hardware",   "prompt_size",
                                          "batch_size", "token_size", "prompt_time",
                                          "token_time", "e2e_time",   "tensor_parallel"};
#define MAX_FIELDS 32

typedef struct run {
    prs_infer_cell key; /* llm, gpu, tp, prompt, batch, out_tokens */
    double prefill_s, decode_s, e2e_s;
} run;

static int cmp_run(const void *a, const void *b)
{
    const prs_infer_cell *x = &((const run *)a)->key, *y = &((const run *)b)->key;
    int d = strcmp(x->llm->name, y->llm->name);
    if (d == 0) d = strcmp(x->gpu->name, y->gpu->name);
    if (d == 0) d = (x->tp > y->tp) - (x->tp < y->tp);
    if (d == 0) d = (x->prompt > y->prompt) - (x->prompt < y->prompt);
    if (d == 0) d = (x->batch > y->batch) - (x->batch < y->batch);
    if (d == 0) d = (x->out_tokens > y->out_tokens) - (x->out_tokens < y->out_tokens);
    return d;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A non-negative number (perseus/numfmt.h's strict parser); 0 or -1. */
static int num(const char *s, double *out)
{
    double v;
    if (prs_num_parse_double(s, &v) != 0 || v < 0) return -1;
    *out = v;
    return 0;
}

/* "a100-80gb" and "h100-80gb" name our GPUs; *skip for the power-capped variants. */
static const prs_infer_gpu *hardware(const char *hw, int *skip)
{
    *skip = strstr(hw, "-pcap") != NULL;
    char name[16];
    size_t n = strcspn(hw, "-");
    if (n >= sizeof name) return NULL;
    memcpy(name, hw, n);
    name[n] = '\0';
    return prs_infer_gpu_find(name);
}

/* One data row into r; 1 when skipped (power-capped), 0 kept, negative on error. */
static int parse_run(char **f, const int *col, const char *name, int line, run *r, prs_error *err)
{
    int skip = 0;
    r->key.llm = prs_infer_llm_find(f[col[K_MODEL]]);
    r->key.gpu = hardware(f[col[K_HW]], &skip);
    if (!r->key.llm || !r->key.gpu)
        return prs_error_set(err, PRS_EPARSE, "%s:%d: unknown model or hardware '%.40s', '%.40s'",
                             name, line, f[col[K_MODEL]], f[col[K_HW]]);
    if (skip) return 1;
    double v[K_NCOLS];
    for (int k = K_PROMPT; k < K_NCOLS; k++)
        if (num(f[col[k]], &v[k]) != 0 || (k != K_E2E && v[k] <= 0) ||
            ((k <= K_OUT || k == K_TP) && (v[k] > 1e9 || v[k] != floor(v[k]))))
            return prs_error_set(err, PRS_EPARSE, "%s:%d: column '%s': bad value '%.40s'", name,
                                 line, COLS[k], f[col[k]]);
    if (v[K_TP] > PRS_INFER_MAX_TP)
        return prs_error_set(err, PRS_EPARSE, "%s:%d: column 'tensor_parallel' above %d", name,
                             line, PRS_INFER_MAX_TP);
    r->key.tp = (int)v[K_TP];
    r->key.prompt = (int)v[K_PROMPT];
    r->key.batch = (int)v[K_BATCH];
    r->key.out_tokens = (int)v[K_OUT];
    r->prefill_s = v[K_PTIME] / 1e3;
    r->decode_s = v[K_TTIME] / 1e3;
    r->e2e_s = v[K_E2E] / 1e3;
    return 0;
}

static int header(char **f, int n, int *col, const char *name, prs_error *err)
{
    for (int k = 0; k < K_NCOLS; k++) {
        col[k] = -1;
        for (int i = 0; i < n && i < MAX_FIELDS; i++)
            if (strcmp(f[i], COLS[k]) == 0) col[k] = i;
        if (col[k] < 0)
            return prs_error_set(err, PRS_EPARSE, "%s:1: missing column '%s'", name, COLS[k]);
    }
    return PRS_OK;
}

/* Every run of the text, power-capped ones left out. */
static int read_runs(const char *text, size_t len, const char *name, run **runs, size_t *nruns,
                     prs_error *err)
{
    if (len > (size_t)PRS_INFER_PROFILE_MAX_BYTES)
        return prs_error_set(err, PRS_EPARSE, "%s: larger than %ld bytes", name,
                             (long)PRS_INFER_PROFILE_MAX_BYTES);
    char line[PRS_INFER_PROFILE_MAX_LINE + 1];
    char *f[MAX_FIELDS];
    int col[K_NCOLS] = {0}, ncols = 0, lineno = 0;
    size_t cap = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - text - pos) : len - pos;
        lineno++;
        if (n > PRS_INFER_PROFILE_MAX_LINE)
            return prs_error_set(err, PRS_EPARSE, "%s:%d: line too long", name, lineno);
        memcpy(line, text + pos, n);
        line[n] = '\0';
        pos += n + 1;
        if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
        if (line[0] == '\0') continue;
        int nf = 0;
        const char *problem = prs__csv_split(line, f, MAX_FIELDS, &nf);
        if (problem) return prs_error_set(err, PRS_EPARSE, "%s:%d: %s", name, lineno, problem);
        if (ncols == 0) {
            int rc = header(f, nf, col, name, err);
            if (rc != PRS_OK) return rc;
            ncols = nf;
            continue;
        }
        if (nf != ncols)
            return prs_error_set(err, PRS_EPARSE, "%s:%d: expected %d fields, got %d", name, lineno,
                                 ncols, nf);
        if (*nruns == cap) {
            cap = cap ? cap * 2 : 256;
            run *nr = realloc(*runs, cap * sizeof *nr);
            if (!nr) return prs_error_set(err, PRS_ENOMEM, "%s: out of memory", name);
            *runs = nr;
        }
        int rc = parse_run(f, col, name, lineno, &(*runs)[*nruns], err);
        if (rc < 0) return rc;
        if (rc == 0) (*nruns)++;
    }
    if (*nruns == 0) return prs_error_set(err, PRS_EPARSE, "%s: no measurements", name);
    return PRS_OK;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The cell of runs[0..n) (one configuration). tmp holds n doubles. */
static void reduce(const run *runs, size_t n, double *tmp, prs_infer_cell *c)
{
    *c = runs[0].key;
    c->runs = (int)n;
    for (size_t i = 0; i < n; i++)
        tmp[i] = runs[i].prefill_s;
    c->prefill_s = median(tmp, n);
    for (size_t i = 0; i < n; i++)
        tmp[i] = runs[i].decode_s;
    c->decode_s = median(tmp, n);
    c->e2e_runs = 0;
    for (size_t i = 0; i < n; i++) {
        const run *r = &runs[i];
        double own = r->prefill_s + (c->out_tokens - 1) * r->decode_s;
        if (!(fabs(own - r->e2e_s) <= PRS_INFER_E2E_SELF_TOL * r->e2e_s)) continue;
        if (c->e2e_runs == 0 || r->e2e_s < c->e2e_min_s) c->e2e_min_s = r->e2e_s;
        if (c->e2e_runs == 0 || r->e2e_s > c->e2e_max_s) c->e2e_max_s = r->e2e_s;
        c->e2e_runs++;
    }
    double flops = 2.0 * c->llm->params * c->batch * (double)c->prompt;
    c->impossible = flops / c->prefill_s > c->tp * c->gpu->peak_flops;
}

int prs_infer_cells_parse(const char *text, size_t len, const char *name, prs_infer_cell **cells,
                          size_t *ncells, prs_error *err)
{
    *cells = NULL;
    *ncells = 0;
    run *runs = NULL;
    size_t nruns = 0;
    int rc = read_runs(text, len, name, &runs, &nruns, err);
    double *tmp = rc == PRS_OK ? malloc((nruns + 1) * sizeof *tmp) : NULL;
    prs_infer_cell *out = rc == PRS_OK ? malloc((nruns + 1) * sizeof *out) : NULL;
    if (rc == PRS_OK && (!tmp || !out)) {
        rc = PRS_ENOMEM;
        prs_error_set(err, rc, "%s: out of memory", name);
    }
    if (rc == PRS_OK && tmp && out && runs) {
        qsort(runs, nruns, sizeof *runs, cmp_run);
        size_t n = 0;
        for (size_t i = 0, j; i < nruns; i = j) {
            for (j = i + 1; j < nruns && cmp_run(&runs[i], &runs[j]) == 0; j++)
                ;
            reduce(runs + i, j - i, tmp, &out[n++]);
        }
        *cells = out;
        *ncells = n;
        out = NULL;
    }
    free(out);
    free(tmp);
    free(runs);
    return rc;
}

void prs_infer_cell_model(const prs_infer_roofline *r, const prs_infer_cell *c, double *prefill_s,
                          double *decode_s)
{
    double e, mhz = r->gpu->f_max_mhz;
    prs_infer_roofline_prefill(r, c->tp, mhz, c->batch, c->prompt, prefill_s, &e);
    prs_infer_roofline_decode(r, c->tp, mhz, c->batch, c->prompt + c->out_tokens / 2.0, decode_s,
                              &e);
}

/* ---- the fit ---- */

const prs_infer_calib prs_infer_calib_start = {
    .eta_prefill = 0.6,
    .eta_prefill_long = 0.4,
    .eta_decode = 0.1,
    .eta_mem = 0.7,
    .t_prefill0_s = 0.01,
    .t_decode0_s = 0.005,
    .t_prefill_seq_s = 0.005,
    .ar_bw_prefill = 50e9,
    .ar_bw_decode = 5e9,
    .ar_bw_prefill_long = 30e9,
    .ar_lat_s = 30e-6,
    .ar_lat_prefill_s = 30e-6,
};

/* The fitted constants: the first NETA are shares in (0, 1), fitted through a logistic; the
 * rest are positive, fitted through their logarithm. The last NLINK are the all-reduce's. */
#define NPARAM 12
/* Evaluations of the residuals a fit may take: some 150 per constant and per restart of the
 * Levenberg-Marquardt damping; a fit from prs_infer_calib_start takes a few thousand. */
#define PRS_INFER_CALIB_MAXFEV 50000
#define NETA 4
#define NLINK 5

typedef const prs_infer_cell *cell_ref;

typedef struct fit_data {
    prs_infer_roofline r;
    const prs_infer_cell *const *cells;
    int ncells;
    int nfree; /* the first nfree of the parameters below are fitted */
    prs_infer_calib fixed;
} fit_data;

static double *param(prs_infer_calib *c, int i)
{
    double *p[NPARAM] = {&c->eta_prefill,     &c->eta_prefill_long,   &c->eta_decode,
                         &c->eta_mem,         &c->t_prefill0_s,       &c->t_decode0_s,
                         &c->t_prefill_seq_s, &c->ar_bw_prefill,      &c->ar_bw_decode,
                         &c->ar_lat_s,        &c->ar_bw_prefill_long, &c->ar_lat_prefill_s};
    return p[i];
}

static double from_x(int i, double x)
{
    return i < NETA ? 1.0 / (1.0 + exp(-x)) : exp(x);
}

static double to_x(int i, double v)
{
    if (i >= NETA) return log(v);
    /* a share at its bound (a fitted 1) starts just inside it, where the logit is finite */
    v = fmin(fmax(v, 1e-6), 1.0 - 1e-6);
    return log(v / (1.0 - v));
}

/* The residual of a relative error e: its square sums to e^2 + e^4 / PRS_INFER_CALIB_SCALE^2,
 * least squares near 0 and closer to a minimax beyond the scale, so the worst cells weigh more
 * than under plain least squares. */
#define PRS_INFER_CALIB_SCALE 0.05
static double penalty(double e)
{
    return e * sqrt(1.0 + (e / PRS_INFER_CALIB_SCALE) * (e / PRS_INFER_CALIB_SCALE));
}

static int residuals(void *ud, int m, int n, const double *x, double *fvec, int iflag)
{
    (void)m;
    (void)iflag;
    fit_data *d = ud;
    prs_infer_roofline r = d->r;
    r.calib = d->fixed;
    for (int i = 0; i < n; i++)
        *param(&r.calib, i) = from_x(i, x[i]);
    for (int i = 0; i < d->ncells; i++) {
        const prs_infer_cell *c = d->cells[i];
        double tp, td;
        prs_infer_cell_model(&r, c, &tp, &td);
        double *f = fvec + 3 * (size_t)i;
        f[0] = penalty(tp / c->prefill_s - 1.0);
        f[1] = penalty(td / c->decode_s - 1.0);
        /* the run's e2e, its decode steps at the mean context; the worst consistent run */
        double e2e = tp + (c->out_tokens - 1) * td, worst = 0;
        if (c->e2e_runs > 0) {
            double lo = e2e / c->e2e_max_s - 1.0, hi = e2e / c->e2e_min_s - 1.0;
            worst = fabs(lo) > fabs(hi) ? lo : hi;
        }
        f[2] = penalty(worst);
    }
    return 0;
}

/* MINPACK's lmdif on the residuals, its work arrays carved from wa (m n + 5 n + m doubles):
 * wa1, wa2, wa3, qtf, diag (n each), wa4 (m), fjac (m x n). */
static int run_lmdif(fit_data *d, int m, double *x, double *fvec, double *wa, int *ipvt)
{
    int n = d->nfree, nfev = 0;
    size_t un = (size_t)n, um = (size_t)m;
    double *wa1 = wa, *wa2 = wa + un, *wa3 = wa + 2 * un, *qtf = wa + 3 * un, *diag = wa + 4 * un;
    double *wa4 = wa + 5 * un, *fjac = wa + 5 * un + um;
    return lmdif(residuals, d, m, n, x, fvec, 1e-8, 1e-8, 0.0, PRS_INFER_CALIB_MAXFEV, 0.0, diag, 1,
                 100.0, 0, &nfev, fjac, m, ipvt, qtf, wa1, wa2, wa3, wa4);
}

int prs_infer_calib_fit(const prs_infer_llm *m, const prs_infer_gpu *g, const prs_infer_cell *cells,
                        size_t ncells, const prs_infer_calib *start, const prs_infer_calib *link,
                        prs_infer_calib *out, prs_error *err)
{
    fit_data d = {.nfree = link ? NPARAM - NLINK : NPARAM, .fixed = *start};
    d.r.llm = m;
    d.r.gpu = g;
    d.r.power = prs_gpu_preset_find(g->power_preset);
    if (link) {
        d.fixed.ar_bw_prefill = link->ar_bw_prefill;
        d.fixed.ar_bw_decode = link->ar_bw_decode;
        d.fixed.ar_lat_s = link->ar_lat_s;
        d.fixed.ar_bw_prefill_long = link->ar_bw_prefill_long;
        d.fixed.ar_lat_prefill_s = link->ar_lat_prefill_s;
    }
    const prs_infer_cell **sel = calloc(ncells + 1, sizeof(cell_ref));
    if (!sel) return prs_error_set(err, PRS_ENOMEM, "calibration: out of memory");
    for (size_t i = 0; i < ncells; i++)
        if (cells[i].llm == m && cells[i].gpu == g && !cells[i].impossible)
            sel[d.ncells++] = &cells[i];
    d.cells = sel;
    int mres = 3 * d.ncells, rc = PRS_OK;
    if (mres < d.nfree) {
        free(sel);
        return prs_error_set(err, PRS_EFIT, "calibration of %s on %s: %d cells, too few", m->name,
                             g->name, d.ncells);
    }
    double x[NPARAM], *fvec = malloc((size_t)mres * sizeof *fvec);
    int lwa = mres * d.nfree + 5 * d.nfree + mres, iwa[NPARAM];
    double *wa = malloc((size_t)lwa * sizeof *wa);
    if (!fvec || !wa) rc = prs_error_set(err, PRS_ENOMEM, "calibration: out of memory");
    for (int i = 0; rc == PRS_OK && i < d.nfree; i++)
        x[i] = to_x(i, *param(&d.fixed, i));
    int info = rc == PRS_OK ? run_lmdif(&d, mres, x, fvec, wa, iwa) : 0;
    if (rc == PRS_OK && (info < 1 || info > 4))
        rc = prs_error_set(err, PRS_EFIT, "calibration of %s on %s: no convergence (MINPACK %d)",
                           m->name, g->name, info);
    if (rc == PRS_OK) {
        *out = d.fixed;
        for (int i = 0; i < d.nfree; i++)
            *param(out, i) = from_x(i, x[i]);
    }
    free(wa);
    free(fvec);
    free(sel);
    return rc;
}
