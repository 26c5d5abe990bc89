/* The synthetic inference model's calibration table (docs/inference.md, "Calibration"): per
 * model, GPU and TP degree, the median and worst relative error of the model against measured
 * prefill times and decode step times (medians over repeated runs), and of whole request batches
 * (e2e) run through the model's synthetic profile. With --fit, the constants are fitted again
 * (prs_infer_calib_fit) and printed as the initialisers of src/infer/roofline_presets.c, and the
 * table shows the fitted model.
 *
 *   infer_calib [--fit] [--cells] [FILE]   FILE: the Splitwise perf_model.csv (default
 *                                          $PRS_SHARED_DIR/data/splitwise/perf_model.csv);
 *                                          --cells: every cell, model against measured */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "perseus/limits.h"
#include "readfile.h"

static void print_calib(const prs_infer_roofline *r)
{
    const prs_infer_calib *c = &r->calib;
    printf("        /* %s on %s */\n"
           "        {.eta_prefill = %.6g, .eta_prefill_long = %.6g, .eta_decode = %.6g, .eta_mem = "
           "%.6g,\n"
           "         .t_prefill0_s = %.6g, .t_decode0_s = %.6g, .ar_bw_prefill = %.6g,\n"
           "         .ar_bw_decode = %.6g, .ar_lat_s = %.6g,\n         .ar_bw_prefill_long = %.6g, "
           ".t_prefill_seq_s = %.6g, .ar_lat_prefill_s = %.6g},\n",
           r->llm->name, r->gpu->name, c->eta_prefill, c->eta_prefill_long, c->eta_decode,
           c->eta_mem, c->t_prefill0_s, c->t_decode0_s, c->ar_bw_prefill, c->ar_bw_decode,
           c->ar_lat_s, c->ar_bw_prefill_long, c->t_prefill_seq_s, c->ar_lat_prefill_s);
}

static void row(const prs_infer_roofline *r, const char *tp, const prs_infer_calib_err *e)
{
    printf("| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %d | %.1f | %.1f |\n", r->llm->name,
           r->gpu->name, tp, e->cells, 100 * e->prefill_med, 100 * e->prefill_worst,
           100 * e->decode_med, 100 * e->decode_worst, e->e2e_runs, 100 * e->e2e_med,
           100 * e->e2e_worst);
}

/* The table's rows of one (model, GPU): each TP degree, then all. */
static int table(const prs_infer_roofline *r, const prs_infer_cell *cells, size_t n)
{
    prs_error err = {0};
    prs_infer_calib_err e;
    for (int tp = 1; tp <= 64; tp *= 2) {
        if (prs_infer_calib_errors(r, cells, n, tp, &e, &err) != PRS_OK) {
            fprintf(stderr, "infer_calib: %s\n", err.msg);
            return 1;
        }
        if (e.cells == 0 && e.excluded == 0) continue;
        char name[16];
        snprintf(name, sizeof name, "%d", tp);
        row(r, name, &e);
    }
    return 0;
}

/* The cells of the measurement file at path (or the default one); 0, or 1 (message printed). */
static int load(const char *path, prs_infer_cell **cells, size_t *n)
{
    char def[4096];
    if (!path) {
        const char *dir = getenv("PRS_SHARED_DIR");
        snprintf(def, sizeof def, "%s/data/splitwise/perf_model.csv", dir ? dir : "../shared");
        path = def;
    }
    size_t len;
    char *text;
    prs_error err = {0};
    int rc = prs__read_bounded(path, (size_t)PRS_INFER_PROFILE_MAX_BYTES,
                               "the calibration file's limit", &text, &len, &err);
    if (rc == PRS_OK) rc = prs_infer_cells_parse(text, len, path, cells, n, &err);
    free(text);
    if (rc != PRS_OK) fprintf(stderr, "infer_calib: %s\n", err.msg);
    return rc != PRS_OK;
}

/* --cells: every cell, model against measured. */
static void print_cells(prs_infer_roofline r[2][2], const prs_infer_cell *cells, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const prs_infer_cell *c = &cells[i];
        const prs_infer_roofline *rr =
            &r[c->gpu == r[0][0].gpu ? 0 : 1][c->llm == r[0][0].llm ? 0 : 1];
        double tp, td;
        prs_infer_cell_model(rr, c, &tp, &td);
        printf("%s %s tp%d p%d b%d o%d: prefill %.1f/%.1f ms (%+.0f%%) decode %.2f/%.2f ms "
               "(%+.0f%%)\n",
               c->llm->name, c->gpu->name, c->tp, c->prompt, c->batch, c->out_tokens, 1e3 * tp,
               1e3 * c->prefill_s, 100 * (tp / c->prefill_s - 1), 1e3 * td, 1e3 * c->decode_s,
               100 * (td / c->decode_s - 1));
    }
}

/* The cells left out, and how many runs enter the e2e check. */
static void print_summary(const prs_infer_cell *cells, size_t n)
{
    long runs = 0, e2e_runs = 0;
    for (size_t i = 0; i < n; i++) {
        const prs_infer_cell *c = &cells[i];
        runs += c->runs;
        e2e_runs += c->e2e_runs;
        if (c->impossible)
            printf("left out: %s %s tp %d prompt %d batch %d: prefill %.1f ms would need %.2f "
                   "PFLOP/s, the GPUs' peak is %.2f\n",
                   c->llm->name, c->gpu->name, c->tp, c->prompt, c->batch, 1e3 * c->prefill_s,
                   2 * c->llm->params * c->batch * c->prompt / c->prefill_s / 1e15,
                   c->tp * c->gpu->peak_flops / 1e15);
    }
    printf("runs (not power-capped): %ld in %zu cells; consistent e2e (within %.0f %% of their own "
           "prefill + (token_size - 1) decode steps): %ld\n",
           runs, n, 100 * PRS_INFER_E2E_SELF_TOL, e2e_runs);
}

int main(int argc, char **argv)
{
    int fit = 0, show_cells = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--fit") == 0) {
            fit = 1;
        } else if (strcmp(argv[i], "--cells") == 0) {
            show_cells = 1;
        } else {
            fprintf(stderr, "usage: infer_calib [--fit] [--cells] [FILE]\n");
            return 2;
        }
    }
    prs_infer_cell *cells = NULL;
    size_t n = 0;
    if (load(i < argc ? argv[i] : NULL, &cells, &n)) return 1;
    const char *gpus[] = {"a100", "h100"}, *llms[] = {"llama2-70b", "bloom-176b"};
    prs_infer_roofline r[2][2];
    prs_error err = {0};
    int rc = PRS_OK;
    for (int g = 0; g < 2 && rc == PRS_OK; g++)
        for (int m = 0; m < 2 && rc == PRS_OK; m++) {
            rc = prs_infer_roofline_init(&r[g][m], prs_infer_llm_find(llms[m]),
                                         prs_infer_gpu_find(gpus[g]), &err);
            if (rc == PRS_OK && fit)
                rc = prs_infer_calib_fit(r[g][m].llm, r[g][m].gpu, cells, n, &prs_infer_calib_start,
                                         NULL, &r[g][m].calib, &err);
        }
    if (rc != PRS_OK) {
        fprintf(stderr, "infer_calib: %s\n", err.msg);
        free(cells);
        return 1;
    }
    if (show_cells) print_cells(r, cells, n);
    for (int m = 0; fit && m < 2; m++)
        for (int g = 0; g < 2; g++)
            print_calib(&r[g][m]);
    printf("| model | GPU | TP | cells | prefill median %% | prefill worst %% | decode median %% "
           "| decode worst %% | e2e runs | e2e median %% | e2e worst %% |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int m = 0; m < 2 && rc == 0; m++)
        for (int g = 0; g < 2 && rc == 0; g++)
            rc = table(&r[g][m], cells, n);
    print_summary(cells, n);
    free(cells);
    return rc;
}
