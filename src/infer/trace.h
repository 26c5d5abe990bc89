/* Request traces for the serving emulator: arrival time, prompt and output lengths of every
 * request, held as one compact array (16 bytes a request: a 7-day trace of 27 M requests takes
 * 432 MB), sorted by arrival.
 *
 * Sources: Azure's LLM inference trace CSV (trace_csv.c, both the 2023 and the 2024 timestamp
 * forms) and a seeded Poisson generator (trace_gen.c). Transforms (trace_xform.c): rate scaling,
 * a time window, tiling into days with a diurnal swing. Every transform writes a new trace and
 * leaves its input alone; every one is deterministic for given arguments. */
#ifndef PRS_INFER_TRACE_H
#define PRS_INFER_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "perseus/error.h"

/* One request. arrival_s counts from the trace's first arrival (which is at 0 after loading). */
typedef struct prs_infer_req {
    double arrival_s;
    int32_t in_tokens;  /* prompt (context) tokens, >= 1 */
    int32_t out_tokens; /* generated tokens, >= 1 */
} prs_infer_req;

typedef struct prs_infer_trace {
    prs_infer_req *reqs; /* n requests, arrival_s ascending; owned */
    size_t n;
    double start_epoch_s; /* wall-clock time (UTC, s since 1970) of arrival_s 0; 0 if unknown */
} prs_infer_trace;

/* Bounds on one request and on a trace, so a bad file cannot exhaust memory. */
#define PRS_INFER_TRACE_MAX_TOKENS 1000000
#define PRS_INFER_TRACE_MAX_REQS 200000000L

/* Load an Azure LLM inference trace CSV: a header naming TIMESTAMP, ContextTokens and
 * GeneratedTokens (in any order, other columns ignored), then one request a line. Timestamps
 * "YYYY-MM-DD HH:MM:SS[.fraction][+00:00|Z]" (any number of fraction digits; a +HH:MM offset is
 * applied). Any malformed row fails with "FILE:LINE: ..." (PRS_EPARSE); nothing is skipped.
 * Rows out of time order are sorted (stable: equal times keep file order). A request with 0
 * generated tokens is refused (the emulator needs at least the first token). On success *out
 * holds the trace (free with prs_infer_trace_free). */
int prs_infer_trace_load(const char *path, prs_infer_trace *out, prs_error *err);

/* The same from an open stream; name stands for the file in messages ("name:line: ..."). */
int prs_infer_trace_read(FILE *f, const char *name, prs_infer_trace *out, prs_error *err);

/* Parse one timestamp as above into seconds since 1970 (UTC). PRS_EPARSE when malformed. */
int prs_infer_parse_timestamp(const char *s, size_t len, double *epoch_s);

void prs_infer_trace_free(prs_infer_trace *t);

/* Rate scaling by factor > 0 (trace_xform.c). Request i is emitted
 * floor(factor*(i+1)) - floor(factor*i) times (so the count is floor(factor*n), thinning
 * evenly when factor < 1); its k copies are spread evenly over the gap to the next arrival
 * (t_i + j*gap/k), keeping the trace's duration and the shape of its rate over time. */
int prs_infer_trace_scale(const prs_infer_trace *in, double factor, prs_infer_trace *out,
                          prs_error *err);

/* Rate scaling by superposing shifted copies: copy j of the trace (j = 0 .. ceil(factor) - 1)
 * is moved by j x shift_s / ceil(factor) seconds, wrapping past the last arrival back to 0, and
 * the last copy keeps a (factor - floor(factor)) share of its requests (by a hash of the
 * index); the result is sorted. Like many independent users, the copies' bursts fall at
 * different times: the load's relative burstiness falls as it grows, where duplication
 * (prs_infer_trace_scale) keeps it. shift_s > 0, at most the trace's span (an hour keeps a
 * daily swing). */
int prs_infer_trace_scale_shift(const prs_infer_trace *in, double factor, double shift_s,
                                prs_infer_trace *out, prs_error *err);
/* Stable sort by arrival (trace_csv.c); name for messages. */
int prs__infer_trace_sort(prs_infer_trace *t, const char *name, prs_error *err);

/* The requests arriving in [from_s, to_s), shifted to start at 0. */
int prs_infer_trace_window(const prs_infer_trace *in, double from_s, double to_s,
                           prs_infer_trace *out, prs_error *err);

/* Tile the trace end to end over days x 24 h, with a diurnal swing: at time t a request of the
 * tiled copy is kept when hash(index) < 1 - depth*(1 - cos(2*pi*(t/86400 - peak_hour/24)))/2,
 * i.e. the rate is the trace's at peak_hour and (1 - depth) of it 12 h away. depth in [0, 1). */
int prs_infer_trace_tile(const prs_infer_trace *in, int days, double depth, double peak_hour,
                         prs_infer_trace *out, prs_error *err);

/* Poisson arrivals at rate_per_s over duration_s (trace_gen.c). Lengths: when lengths is
 * non-NULL, each request copies the lengths of a request of lengths drawn uniformly; else
 * in_tokens and out_tokens fixed. seed makes it reproducible. */
int prs_infer_trace_poisson(double rate_per_s, double duration_s, const prs_infer_trace *lengths,
                            int in_tokens, int out_tokens, uint64_t seed, prs_infer_trace *out,
                            prs_error *err);

/* The highest arrival rate (requests/s) over consecutive windows of window_s (0 for an empty
 * trace). */
double prs_infer_trace_peak_rate(const prs_infer_trace *t, double window_s);

/* splitmix64: the generator behind every seeded choice in src/infer. */
uint64_t prs__infer_mix64(uint64_t x);
/* A uniform double in [0, 1) from x (hash-based). */
double prs__infer_unit(uint64_t x);

#endif
