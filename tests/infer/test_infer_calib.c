/* Calibration of the synthetic inference model (src/infer/calib.h) against the Splitwise
 * measurements ($PRS_SHARED_DIR/data/splitwise/perf_model.csv; skipped when absent, failed
 * under CI=true): over every cell of every (model, GPU) but the impossible ones, the model's
 * median error at most 10 % and worst at most 25 % for prefill time and decode step time; every
 * consistent run's e2e within 10 % when its batch goes through the model's synthetic profile;
 * and a fit from the generic start re-derives the presets (the same times within 0.1 %). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "calib.h"
#include "skips.h"

static prs_infer_cell *cells;
static size_t ncells;
static const char *const LLMS[] = {"llama2-70b", "bloom-176b"}, *const GPUS[] = {"a100", "h100"};

static int load_cells(void **state)
{
    (void)state;
    const char *dir = getenv("PRS_SHARED_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/data/splitwise/perf_model.csv", dir ? dir : "");
    FILE *f = dir ? fopen(path, "rb") : NULL;
    if (!f) return 0; /* the cases skip (or fail under CI) */
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    prs_error err = {0};
    if (len == sizeof text || prs_infer_cells_parse(text, len, path, &cells, &ncells, &err) != 0) {
        print_error("cannot read %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

static int free_cells(void **state)
{
    (void)state;
    free(cells);
    return 0;
}

static int have_data(void)
{
    if (cells) return 1;
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) fail_msg("CI=true but the Splitwise data is missing");
    return 0;
}

static void test_bounds(void **state)
{
    (void)state;
    if (!have_data()) {
        prs_skip_case("no $PRS_SHARED_DIR/data/splitwise/perf_model.csv");
        return;
    }
    int total = 0;
    for (int m = 0; m < 2; m++)
        for (int g = 0; g < 2; g++) {
            prs_infer_roofline r;
            prs_error err = {0};
            assert_int_equal(prs_infer_roofline_init(&r, prs_infer_llm_find(LLMS[m]),
                                                     prs_infer_gpu_find(GPUS[g]), &err),
                             PRS_OK);
            prs_infer_calib_err e;
            if (prs_infer_calib_errors(&r, cells, ncells, 0, &e, &err) != PRS_OK)
                fail_msg("%s", err.msg);
            print_message("%s %s: %d cells (%d left out), prefill %.1f/%.1f %%, decode %.1f/%.1f "
                          "%%, e2e %d runs %.1f/%.1f %%\n",
                          LLMS[m], GPUS[g], e.cells, e.excluded, 100 * e.prefill_med,
                          100 * e.prefill_worst, 100 * e.decode_med, 100 * e.decode_worst,
                          e.e2e_runs, 100 * e.e2e_med, 100 * e.e2e_worst);
            assert_true(e.cells >= 19);
            assert_true(e.excluded <= 1);
            assert_true(e.prefill_med <= 0.10 && e.decode_med <= 0.10);
            assert_true(e.prefill_worst <= 0.25 && e.decode_worst <= 0.25);
            assert_true(e.e2e_runs >= 70);
            assert_true(e.e2e_worst <= 0.10);
            total += e.cells;
        }
    assert_true(total >= 4 * 19);
}

static void test_refit(void **state)
{
    (void)state;
    if (!have_data()) {
        prs_skip_case("no $PRS_SHARED_DIR/data/splitwise/perf_model.csv");
        return;
    }
    for (int m = 0; m < 2; m++)
        for (int g = 0; g < 2; g++) {
            prs_infer_roofline r, fit;
            prs_error err = {0};
            assert_int_equal(prs_infer_roofline_init(&r, prs_infer_llm_find(LLMS[m]),
                                                     prs_infer_gpu_find(GPUS[g]), &err),
                             PRS_OK);
            fit = r;
            if (prs_infer_calib_fit(r.llm, r.gpu, cells, ncells, &prs_infer_calib_start, NULL,
                                    &fit.calib, &err) != PRS_OK)
                fail_msg("%s", err.msg);
            for (size_t i = 0; i < ncells; i++) {
                if (cells[i].llm != r.llm || cells[i].gpu != r.gpu) continue;
                double p0, d0, p1, d1;
                prs_infer_cell_model(&r, &cells[i], &p0, &d0);
                prs_infer_cell_model(&fit, &cells[i], &p1, &d1);
                assert_true(fabs(p1 / p0 - 1) < 1e-3 && fabs(d1 / d0 - 1) < 1e-3);
            }
        }
}

static void test_cells(void **state)
{
    (void)state;
    /* Two runs of one configuration, a power-capped run (skipped), a run that stopped early. */
    static const char text[] =
        "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,"
        "token_time,e2e_time,tensor_parallel\n"
        "llama2-70b,h100-80gb,512,1,128,1,0.7,50,30,3860,4\n"
        "llama2-70b,h100-80gb,512,1,128,1,0.7,60,31,4000,4\n"
        "llama2-70b,h100-80gb,512,1,128,1,0.7,70,32,2000,4\n"
        "llama2-70b,h100-80gb-pcap,512,1,128,1,0.7,80,30,3900,4\n"
        "llama2-70b,h100-80gb,512,64,128,1,0.7,100,40,9000,2\n";
    prs_infer_cell *c;
    size_t n;
    prs_error err = {0};
    assert_int_equal(prs_infer_cells_parse(text, sizeof text - 1, "t.csv", &c, &n, &err), PRS_OK);
    assert_int_equal(n, 2);
    /* sorted: tp 2 first */
    assert_int_equal(c[0].tp, 2);
    assert_true(c[0].impossible); /* 64 x 512 tokens of 69e9 params in 0.1 s on two H100s */
    assert_int_equal(c[1].runs, 3);
    assert_true(fabs(c[1].prefill_s - 0.060) < 1e-12);
    assert_true(fabs(c[1].decode_s - 0.031) < 1e-12);
    assert_int_equal(c[1].e2e_runs, 2); /* 2000 ms is far from 70 + 127 x 32 */
    assert_true(fabs(c[1].e2e_min_s - 3.86) < 1e-12 && fabs(c[1].e2e_max_s - 4.0) < 1e-12);
    assert_false(c[1].impossible);
    free(c);
    static const char bad[] = "model,hardware,prompt_size,batch_size,token_size,prompt_time,"
                              "token_time,e2e_time,tensor_parallel\n"
                              "llama2-70b,h100-80gb,512,1,128,x,30,3860,4\n";
    assert_int_equal(prs_infer_cells_parse(bad, sizeof bad - 1, "t.csv", &c, &n, &err), PRS_EPARSE);
    assert_non_null(strstr(err.msg, "t.csv:2: column 'prompt_time'"));
    static const char unknown[] = "model,hardware,prompt_size,batch_size,token_size,prompt_time,"
                                  "token_time,e2e_time,tensor_parallel\n"
                                  "gpt-4,h100-80gb,512,1,128,1,30,3860,4\n";
    assert_int_equal(prs_infer_cells_parse(unknown, sizeof unknown - 1, "t.csv", &c, &n, &err),
                     PRS_EPARSE);
    assert_non_null(strstr(err.msg, "t.csv:2: unknown model"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cells),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_refit),
    };
    return prs_test_result(cmocka_run_group_tests(tests, load_cells, free_cells));
}
