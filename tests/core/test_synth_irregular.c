/* Irregular synthetic profiles (prs_synth_opts.irregular, perseus synth --irregular): every
 * (stage, instruction) curve of the A40 and H100 presets has a jump (a clock about
 * PRS_SYNTH_JUMP_MHZ under another, at most 8 % slower and over 5 % cheaper, the clocks between
 * them no cheaper than the upper one, to 1 %) and a non-monotone energy; the curves depend on
 * the seed alone, and the flag's absence leaves a profile as it was (no draw from the noise's
 * stream). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/gpumodel.h"
#include "perseus/synth.h"

static prs_profile *make(const char *gpu, int irregular, uint64_t seed, double noise)
{
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.gpu = prs_gpu_preset_find(gpu);
    o.stages = 3;
    o.irregular = irregular;
    o.seed = seed;
    o.noise = noise;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_synth_profile(&o, &p, &err), 0);
    return p;
}

static int same(const prs_profile *a, const prs_profile *b)
{
    size_t n = prs_profile_nrows(a);
    if (n != prs_profile_nrows(b)) return 0;
    const prs_profile_row *x = prs_profile_rows(a), *y = prs_profile_rows(b);
    for (size_t i = 0; i < n; i++)
        if (x[i].freq_mhz != y[i].freq_mhz || x[i].time_s != y[i].time_s ||
            x[i].energy_j != y[i].energy_j)
            return 0;
    return 1;
}

/* The rows of (stage, instr), highest clock first (the synth order), into r; their count. */
static int curve(const prs_profile *p, int stage, prs_instr instr, const prs_profile_row **r)
{
    int n = 0;
    const prs_profile_row *rows = prs_profile_rows(p);
    for (size_t i = 0; i < prs_profile_nrows(p); i++)
        if (rows[i].stage == stage && rows[i].instr == instr) r[n++] = &rows[i];
    return n;
}

static void check_jumps(const prs_profile *p)
{
    const prs_profile_row *r[512];
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 2; i++) {
            int n = curve(p, s, (prs_instr)i, r), jump = 0, rises = 0;
            assert_true(n > 10 && n <= 512);
            for (int a = 0; a < n; a++) /* r[a] above r[b] */
                for (int b = a + 1; b < n && !jump; b++) {
                    int gap = r[a]->freq_mhz - r[b]->freq_mhz;
                    if (gap < 150 || gap > 270 || r[b]->time_s > 1.08 * r[a]->time_s ||
                        !(r[b]->energy_j < 0.95 * r[a]->energy_j))
                        continue;
                    jump = 1;
                    for (int c = a + 1; c < b; c++)
                        jump = jump && r[c]->energy_j > 0.99 * r[a]->energy_j;
                }
            for (int a = 0; a + 1 < n; a++)
                rises += r[a + 1]->energy_j > r[a]->energy_j;
            assert_true(jump);
            assert_true(rises > 0);
        }
}

static void test_irregular(void **state)
{
    (void)state;
    const char *gpus[] = {"a40", "h100"};
    for (int g = 0; g < 2; g++) {
        prs_profile *a = make(gpus[g], 1, 7, 0), *b = make(gpus[g], 1, 7, 0);
        prs_profile *c = make(gpus[g], 1, 8, 0), *plain = make(gpus[g], 0, 7, 0);
        prs_profile *plain2 = make(gpus[g], 0, 8, 0);
        assert_true(same(a, b));
        assert_false(same(a, c));
        assert_false(same(a, plain));
        assert_true(same(plain, plain2)); /* no noise, no irregularity: the seed is unused */
        check_jumps(a);
        check_jumps(c);
        prs_profile *n1 = make(gpus[g], 0, 5, 0.02), *n2 = make(gpus[g], 1, 5, 0.02);
        const prs_profile_row *x = prs_profile_rows(n1), *y = prs_profile_rows(n2);
        /* the noise's stream is the same with and without the flag: the top clock's row, above
         * every band, is the same noisy model row */
        assert_true(x[0].time_s == y[0].time_s);
        prs_profile_free(n1);
        prs_profile_free(n2);
        prs_profile_free(a);
        prs_profile_free(b);
        prs_profile_free(c);
        prs_profile_free(plain);
        prs_profile_free(plain2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_irregular)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
