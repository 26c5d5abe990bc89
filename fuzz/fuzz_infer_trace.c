/* Fuzz target for the request-trace reader and transforms (src/infer/trace.h).
 *
 * Any byte string must either load as a trace, or fail with PRS_EPARSE (PRS_ENOMEM, PRS_ERANGE
 * under limits), no requests kept, and a one-line "fuzz.csv..." message. A trace that loads has
 * at least one request, arrivals from 0 ascending and finite, token counts within the bounds;
 * scaling it by a factor from the input's bytes keeps it sorted with floor(factor x n) requests,
 * and a window of it holds only arrivals inside the window, shifted. A broken invariant calls
 * abort(), which libFuzzer and the replay program report as a crash. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char NAME[] = "fuzz.csv";

static void check(int ok)
{
    if (!ok) abort();
}

static void check_trace(const prs_infer_trace *t)
{
    check(t->n >= 1 && t->reqs != NULL);
    for (size_t i = 0; i < t->n; i++) {
        check(isfinite(t->reqs[i].arrival_s) && t->reqs[i].arrival_s >= 0);
        check(i == 0 || t->reqs[i].arrival_s >= t->reqs[i - 1].arrival_s);
        check(t->reqs[i].in_tokens >= 1 && t->reqs[i].in_tokens <= PRS_INFER_TRACE_MAX_TOKENS);
        check(t->reqs[i].out_tokens >= 1 && t->reqs[i].out_tokens <= PRS_INFER_TRACE_MAX_TOKENS);
    }
}

static void transforms(const prs_infer_trace *t, const uint8_t *data, size_t size)
{
    double factor = 0.25 + (size ? data[size - 1] : 0) / 64.0;
    prs_infer_trace s;
    prs_error err = {0};
    check(prs_infer_trace_scale(t, factor, &s, &err) == 0);
    check(s.n == (size_t)floor(factor * (double)t->n));
    for (size_t i = 1; i < s.n; i++)
        check(s.reqs[i].arrival_s >= s.reqs[i - 1].arrival_s);
    prs_infer_trace_free(&s);
    double end = t->reqs[t->n - 1].arrival_s, from = end / 3, to = from + end / 3 + 1;
    int rc = prs_infer_trace_window(t, from, to, &s, &err);
    check(rc == 0 || rc == PRS_ERANGE);
    for (size_t i = 0; rc == 0 && i < s.n; i++)
        check(s.reqs[i].arrival_s >= 0 && s.reqs[i].arrival_s < to - from);
    prs_infer_trace_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* fmemopen of an empty buffer fails on some C libraries: give it one byte it cannot read. */
    char *buf = malloc(size + 1);
    check(buf != NULL);
    memcpy(buf, data, size);
    FILE *f = fmemopen(buf, size ? size : 1, "r");
    check(f != NULL);
    if (size == 0) fgetc(f);
    prs_infer_trace t;
    prs_error err = {0};
    int rc = prs_infer_trace_read(f, NAME, &t, &err);
    fclose(f);
    if (rc == 0) {
        check_trace(&t);
        transforms(&t, data, size);
        prs_infer_trace_free(&t);
    } else {
        check(rc == PRS_EPARSE || rc == PRS_ENOMEM || rc == PRS_ERANGE);
        check(t.reqs == NULL && t.n == 0);
        check(err.code == rc);
        size_t n = strnlen(err.msg, sizeof err.msg);
        check(n < sizeof err.msg);
        check(strncmp(err.msg, NAME, strlen(NAME)) == 0);
        check(memchr(err.msg, '\n', n) == NULL);
    }
    free(buf);
    return 0;
}
