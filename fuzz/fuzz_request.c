/* Fuzz target for perseusd's request-body parsing (src/server/request.h).
 *
 * The first byte picks the body kind (mod 4: job spec, rank registration, results, straggler);
 * the rest is the body. Any byte string must either parse into a struct that satisfies the
 * documented ranges, or fail with a non-empty, one-line, printable message. A job spec that
 * parses must come back identical from its canonical JSON (spec_json). A broken
 * invariant calls abort(), which libFuzzer and the replay programs report as a crash.
 *
 * The parser lives in the server library (jansson): fuzz/CMakeLists.txt links it and defines
 * PRS_FUZZ_REQUEST_LINKED for this target. tests/server/test_fuzz_request.c also replays
 * fuzz/corpus/fuzz_request/ with mutations in every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef PRS_FUZZ_REQUEST_LINKED
#include <math.h>

#include "request.h"

static void check(int ok)
{
    if (!ok) abort();
}

static void check_msg(const char *msg)
{
    size_t n = strnlen(msg, REQ_MSG_MAX);
    check(n > 0 && n < REQ_MSG_MAX);
    for (size_t i = 0; i < n; i++)
        check((unsigned char)msg[i] >= 0x20 && (unsigned char)msg[i] < 0x7f);
}

static void check_spec(const job_spec *s)
{
    check(s->stages >= 1 && s->stages <= REQ_MAX_STAGES);
    check(s->microbatches >= 1 && s->dp >= 1 && s->tp >= 1);
    check((long)s->stages * s->dp * s->tp <= REQ_MAX_WORLD);
    check(s->nclocks >= 1 && s->nclocks <= REQ_MAX_CLOCKS);
    for (int i = 0; i < s->nclocks; i++) {
        check(s->clocks_mhz[i] >= 1 && s->clocks_mhz[i] <= REQ_MAX_CLOCK_MHZ);
        if (i) check(s->clocks_mhz[i] < s->clocks_mhz[i - 1]);
    }
    check(s->min_clock_mhz <= s->clocks_mhz[0]);
    check(isfinite(s->unit_time_s) && s->unit_time_s > 0);
    check(isfinite(s->blocking_power_w) && s->blocking_power_w >= 0);
    check(s->has_blocking_power || s->blocking_power_w == 0);
    check(isfinite(s->switch_lead_s) && s->switch_lead_s >= 0);
    check(s->straggler_factor > 1 && s->straggler_iterations >= 1);
    check((long)s->stages * spec_ops_per_stage(s) <= REQ_MAX_OPS);
    check(strlen(s->model) <= REQ_MAX_MODEL);
    /* Canonical JSON round trip. */
    json_t *j = spec_json(s);
    if (!j) return; /* out of memory */
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text) return;
    job_spec back;
    prs_error err;
    check(req_parse_job_spec(text, strlen(text), &back, &err) == 0);
    check(memcmp(s, &back, sizeof back) == 0);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    prs_error err;
    memset(&err, 0, sizeof err);
    const char *msg = err.msg;
    int rc;
    switch (data[0] % 4) {
    case 0: {
        job_spec s;
        rc = req_parse_job_spec(body, len, &s, &err);
        if (rc == 0) check_spec(&s);
        break;
    }
    case 1: {
        req_rank r;
        rc = req_parse_rank(body, len, &r, &err);
        if (rc == 0)
            check(r.rank >= 0 && r.dp >= 0 && r.pp >= 0 && r.tp >= 0 &&
                  strlen(r.gpu) <= REQ_MAX_GPU);
        break;
    }
    case 2: {
        req_results r;
        rc = req_parse_results(body, len, &r, &err);
        if (rc == 0) {
            check(r.niterations >= 1 && r.niterations <= REQ_MAX_ITERATIONS);
            size_t nw = 0;
            for (size_t i = 0; i < r.niterations; i++) {
                const req_iteration *it = &r.iterations[i];
                check(it->iteration >= 0 && isfinite(it->time_s) && it->time_s > 0);
                check(isfinite(it->energy_j) && it->energy_j >= 0);
                check(it->pace_s == 0 || (isfinite(it->pace_s) && it->pace_s > 0));
                check(it->plan_id >= -1);
                check(it->blocking_power_w == 0 ||
                      (isfinite(it->blocking_power_w) && it->blocking_power_w > 0));
                for (size_t w = 0; w < it->nwindows; w++) {
                    const req_window *win = &it->windows[w];
                    check(win->instr == PRS_FORWARD || win->instr == PRS_BACKWARD);
                    check(win->clock_mhz >= 1 && win->time_s > 0 && win->energy_j > 0);
                    check(win->chunk >= -1 && win->microbatch >= -1);
                }
                nw += it->nwindows;
            }
            check(nw <= REQ_MAX_WINDOWS);
            req_results_free(&r);
        } else {
            check(r.iterations == NULL && r.all_windows == NULL);
        }
        break;
    }
    default: {
        req_straggler s;
        rc = req_parse_straggler(body, len, &s, &err);
        if (rc == 0) check(s.dp >= 0 && ((s.time_s > 0) != (s.slowdown > 0)));
        /* the power cap's body, on the same bytes */
        double w = 0;
        prs_error cap_err;
        memset(&cap_err, 0, sizeof cap_err);
        int cap_rc = req_parse_power_cap(body, len, &w, &cap_err);
        check(cap_rc == 0 || cap_rc == PRS_EINVAL);
        if (cap_rc == 0) check(isfinite(w) && w > 0 && w <= REQ_MAX_POWER_CAP_W);
        if (cap_rc) check_msg(cap_err.msg);
        break;
    }
    }
    check(rc == 0 || rc == PRS_EINVAL);
    if (rc) check_msg(msg);
    return 0;
}
#else
#error "fuzz_request needs the server library: build it through fuzz/CMakeLists.txt"
#endif
