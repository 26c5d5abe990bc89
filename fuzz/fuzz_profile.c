/* Fuzz target for the stage-profile CSV reader (profile.h).
 *
 * Any byte string must either parse, or fail with PRS_EPARSE (PRS_ENOMEM under memory limits), a
 * NULL *out and a one-line "fuzz.csv..." message. A profile that parses must hold only valid rows,
 * and must survive write_csv -> parse unchanged (same rows, doubles bit for bit, same text when
 * written again). A broken invariant calls abort(), which libFuzzer and the replay program report
 * as a crash; this is the only place in the project where abort() is fine. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "perseus/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char NAME[] = "fuzz.csv";

static void check(int ok)
{
    if (!ok) abort();
}

static void check_error(int rc, const prs_profile *p, const prs_error *err)
{
    check(p == NULL);
    check(rc == PRS_EPARSE || rc == PRS_ENOMEM);
    check(err->code == rc);
    size_t n = strnlen(err->msg, sizeof err->msg);
    check(n < sizeof err->msg);
    check(strncmp(err->msg, NAME, strlen(NAME)) == 0);
    check(err->msg[strlen(NAME)] == ':');
    check(memchr(err->msg, '\n', n) == NULL);
}

static int same_bits(double a, double b)
{
    uint64_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

/* Writes p as CSV into a new malloc'd buffer (*len bytes), or returns NULL. */
static char *write_csv(const prs_profile *p, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    int rc = prs_profile_write_csv(p, f);
    if (fclose(f) != 0 || rc != PRS_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    prs_profile *p = (prs_profile *)&size; /* must be overwritten */
    prs_error err = {0};
    int rc = prs_profile_parse(NAME, (const char *)data, size, &p, &err);
    if (rc != PRS_OK) {
        check_error(rc, p, &err);
        return 0;
    }
    check(p != NULL);

    /* Everything kept is a valid forward/backward row. */
    size_t n = prs_profile_nrows(p);
    const prs_profile_row *rows = prs_profile_rows(p);
    check(n > 0);
    int max_stage = -1, prev_line = 0;
    for (size_t i = 0; i < n; i++) {
        const prs_profile_row *r = &rows[i];
        check(r->stage >= 0);
        check(r->instr == PRS_FORWARD || r->instr == PRS_BACKWARD);
        check(r->freq_mhz > 0);
        check(isfinite(r->time_s) && r->time_s > 0);
        check(isfinite(r->energy_j) && r->energy_j > 0);
        check(r->line > prev_line);
        prev_line = r->line;
        if (r->stage > max_stage) max_stage = r->stage;
    }
    check(prs_profile_num_stages(p) == max_stage + 1);
    check(strcmp(prs_profile_name(p), NAME) == 0);
    prs_error serr = {0};
    int src = prs_profile_check_stages(p, prs_profile_num_stages(p), &serr);
    check(src == PRS_OK || (src == PRS_EPARSE && strstr(serr.msg, " has no ") != NULL));

    /* Round trip. */
    size_t len = 0;
    char *text = write_csv(p, &len);
    if (!text) { /* out of memory while writing: nothing to compare */
        prs_profile_free(p);
        return 0;
    }
    prs_profile *q = NULL;
    rc = prs_profile_parse(NAME, text, len, &q, &err);
    if (rc == PRS_ENOMEM) {
        free(text);
        prs_profile_free(p);
        return 0;
    }
    check(rc == PRS_OK);
    check(prs_profile_nrows(q) == n);
    const prs_profile_row *back = prs_profile_rows(q);
    for (size_t i = 0; i < n; i++) {
        check(back[i].stage == rows[i].stage);
        check(back[i].instr == rows[i].instr);
        check(back[i].freq_mhz == rows[i].freq_mhz);
        check(same_bits(back[i].time_s, rows[i].time_s));
        check(same_bits(back[i].energy_j, rows[i].energy_j));
        check(back[i].line == (int)i + 2);
    }
    size_t len2 = 0;
    char *text2 = write_csv(q, &len2);
    if (text2) {
        check(len2 == len && memcmp(text, text2, len) == 0);
        free(text2);
    }
    free(text);
    prs_profile_free(q);
    prs_profile_free(p);
    return 0;
}
