/* Seeded generators for src/infer: splitmix64 and the Poisson request generator (trace.h).
 *
 * splitmix64 is a bijective 64-bit mixer: hashing an index gives an independent-looking uniform
 * value without state, so thinning, tiling and the output-length predictor decide each request
 * from its index alone and any run is reproducible. */
#include "trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t prs__infer_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

double prs__infer_unit(uint64_t x)
{
    return (double)(prs__infer_mix64(x) >> 11) * (1.0 / 9007199254740992.0);
}

int prs_infer_trace_poisson(double rate_per_s, double duration_s, const prs_infer_trace *lengths,
                            int in_tokens, int out_tokens, uint64_t seed, prs_infer_trace *out,
                            prs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!(rate_per_s > 0) || !(duration_s > 0) || !isfinite(rate_per_s * duration_s))
        return prs_error_set(err, PRS_EINVAL, "Poisson rate and duration must be > 0");
    if (lengths && lengths->n == 0)
        return prs_error_set(err, PRS_EINVAL, "Poisson length source is empty");
    if (!lengths && (in_tokens < 1 || out_tokens < 1 || in_tokens > PRS_INFER_TRACE_MAX_TOKENS ||
                     out_tokens > PRS_INFER_TRACE_MAX_TOKENS))
        return prs_error_set(err, PRS_EINVAL, "Poisson lengths must be in 1..%d",
                             PRS_INFER_TRACE_MAX_TOKENS);
    double expect = rate_per_s * duration_s;
    double cap = expect + 10 * sqrt(expect) + 16;
    if (cap > (double)PRS_INFER_TRACE_MAX_REQS)
        return prs_error_set(err, PRS_ERANGE, "Poisson trace of %.0f requests exceeds %ld", expect,
                             PRS_INFER_TRACE_MAX_REQS);
    out->reqs = malloc((size_t)cap * sizeof *out->reqs);
    if (!out->reqs) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    uint64_t state = prs__infer_mix64(seed);
    double t = 0;
    for (;;) {
        double u = prs__infer_unit(state++);
        t += -log1p(-u) / rate_per_s;
        if (t >= duration_s || out->n >= (size_t)cap) break;
        prs_infer_req q = {.arrival_s = t, .in_tokens = in_tokens, .out_tokens = out_tokens};
        if (lengths) {
            size_t k = (size_t)(prs__infer_unit(state++) * (double)lengths->n);
            q.in_tokens = lengths->reqs[k].in_tokens;
            q.out_tokens = lengths->reqs[k].out_tokens;
        }
        out->reqs[out->n++] = q;
    }
    return PRS_OK;
}
