/* Replays fuzz/corpus/fuzz_request/ through the fuzz target fuzz/fuzz_request.c (compiled here
 * with the server library linked), then 300 deterministic mutations of each input (byte flips,
 * insertions, truncations), so request parsing is fuzz-checked in every build, ASan included. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"
#include "skips.h"

#define PRS_FUZZ_REQUEST_LINKED 1
#include "../../fuzz/fuzz_request.c"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    return prs_test_rng_next(&rng);
}

static void test_corpus_and_mutations(void **state)
{
    (void)state;
    const char *src = getenv("PRS_SOURCE_DIR");
    if (!src) prs_skip_input("PRS_SOURCE_DIR not set");
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/corpus/fuzz_request", src);
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    static const char tokens[][12] = {"{",    "}",   "[",       "]",        ",",
                                      ":",    "\"",  "1e308",   "-1",       "null",
                                      "true", "0.5", "\\u0000", "\"rank\"", "\"stages\""};
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char file[1400];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        FILE *f = fopen(file, "rb");
        assert_non_null(f);
        uint8_t buf[8192];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        files++;
        for (int m = 0; m < 300; m++) {
            uint8_t mut[8300];
            size_t len = n;
            memcpy(mut, buf, n);
            int edits = 1 + (int)(next() % 4);
            for (int k = 0; k < edits && len > 0; k++) {
                size_t at = (size_t)(next() % len);
                switch (next() % 4) {
                case 0:
                    mut[at] ^= (uint8_t)(1u << (next() % 8));
                    break;
                case 1:
                    len = at + 1;
                    break;
                case 2: {
                    const char *t = tokens[next() % (sizeof tokens / sizeof tokens[0])];
                    size_t tl = strlen(t);
                    if (len + tl < sizeof mut) {
                        memmove(mut + at + tl, mut + at, len - at);
                        memcpy(mut + at, t, tl);
                        len += tl;
                    }
                    break;
                }
                default:
                    mut[at] = (uint8_t)next();
                }
            }
            LLVMFuzzerTestOneInput(mut, len);
        }
    }
    closedir(d);
    assert_true(files >= 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus_and_mutations)};
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
