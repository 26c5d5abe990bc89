/* Fuzz target for the inference-profile CSV reader (src/infer/profile.h).
 *
 * Any byte string must either load, or fail with PRS_EPARSE (PRS_ENOMEM under memory limits), a
 * NULL profile and a one-line "fuzz.csv..." message. A profile that loads must answer through
 * its backend (perf.h) at every TP degree and clock it lists: idle power finite and >= 0, a
 * positive capacity, and prefill and decode questions (batch and tokens taken from the input's
 * bytes) either refused with PRS_ERANGE or answered with figures the emulator may trust. A
 * broken invariant calls abort(), which libFuzzer and the replay program report as a crash. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char NAME[] = "fuzz.csv";

static void check(int ok)
{
    if (!ok) abort();
}

static void check_error(int rc, const prs_infer_profile *p, const prs_error *err)
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

/* One prefill and one decode question at (tp, mhz), sized from the input's bytes. */
static void ask(const prs_infer_perf *pf, int tp, int mhz, const uint8_t *data, size_t size,
                size_t k)
{
    int batch = 1 + (size ? data[k % size] : 0);
    long tokens = (long)batch * (1 + 37L * (size ? data[(k + 1) % size] : 0));
    prs_error err = {0};
    double t = -1, e = -1;
    prs_infer_prefill pre = {.n_seqs = batch, .tokens = tokens};
    int rc = pf->prefill(pf->ctx, tp, mhz, &pre, &t, &e, &err);
    check(rc == PRS_OK || rc == PRS_ERANGE);
    if (rc == PRS_OK) check(prs__infer_perf_figures_ok(t, e));
    prs_infer_decode dec = {.n_seqs = batch, .ctx_tokens = tokens};
    rc = pf->decode(pf->ctx, tp, mhz, &dec, &t, &e, &err);
    check(rc == PRS_OK || rc == PRS_ERANGE);
    if (rc == PRS_OK) check(prs__infer_perf_figures_ok(t, e));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    prs_infer_profile *p = (prs_infer_profile *)&size; /* must be overwritten */
    prs_error err = {0};
    int rc = prs_infer_profile_parse((const char *)data, size, NAME, &p, &err);
    if (rc != PRS_OK) {
        check_error(rc, p, &err);
        return 0;
    }
    check(p != NULL);
    prs_infer_perf pf;
    prs_infer_profile_perf(p, &pf);
    check(prs__infer_perf_check(&pf, &err) == PRS_OK);
    const int *tps, *mhz;
    int ntp, nclk;
    check(pf.tps(pf.ctx, &tps, &ntp) == PRS_OK && ntp > 0);
    check(pf.clocks(pf.ctx, &mhz, &nclk) == PRS_OK && nclk > 0);
    size_t k = 0;
    for (int i = 0; i < ntp; i++) {
        check(i == 0 || tps[i] > tps[i - 1]);
        long kv = 0;
        int batch = 0;
        check(pf.capacity(pf.ctx, tps[i], &kv, &batch, &err) == PRS_OK && kv > 0 && batch > 0);
        for (int c = 0; c < nclk; c++, k += 2) {
            check(c == 0 || mhz[c] > mhz[c - 1]);
            double w = -1;
            check(pf.idle_power(pf.ctx, tps[i], mhz[c], &w, &err) == PRS_OK);
            check(isfinite(w) && w >= 0);
            ask(&pf, tps[i], mhz[c], data, size, k);
        }
    }
    prs_infer_profile_free(p);
    return 0;
}
