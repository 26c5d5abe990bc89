/* The engine of the fake serving instance (fake_engine.c): iteration-level continuous batching
 * as vLLM runs it, in real time, each iteration lasting what the inference cost model (the
 * roofline model of src/infer) gives for its batch at the instance's TP and its GPU's current SM
 * clock, divided by a speed-up factor.
 *
 * An iteration is either the prefill of the waiting prompts that fit (batch and token budget, KV
 * capacity), each of which then holds its first token, or one decode step of every running
 * sequence, each gaining a token. A sequence ends after its requested number of tokens. The
 * clock is read from a file (one integer, MHz) before each iteration when one is given, so a
 * controller outside can change it; values outside the GPU's range are clamped.
 *
 * The engine keeps a model clock: an iteration that follows another starts where it ended (in
 * model time), ends its cost model's time later, and the engine sleeps until that deadline's
 * real time (model time / speed-up since the start), so the host's scheduling delays do not
 * pile up in the model's time; a late wake-up is made up by the next iterations. Times in the
 * statistics are model seconds (real seconds x speed-up), as a real engine at that speed would
 * report them. One mutex guards everything; the iteration's sleep waits on a condition. */
#ifndef PRS_FAKESERVE_ENGINE_H
#define PRS_FAKESERVE_ENGINE_H

#include "perseus/error.h"
#include "prom.h"
#include "roofline.h"

typedef struct prs_fake_engine prs_fake_engine;
typedef struct prs_fake_seq prs_fake_seq;

typedef struct prs_fake_opts {
    prs_infer_roofline model;
    int tp;
    int mhz;                 /* the clock when no file is given, or until the file is readable */
    const char *clock_file;  /* NULL: fixed clock */
    double speedup;          /* model seconds per real second, > 0 */
    int max_running;         /* sequences decoded together at most */
    long max_batched_tokens; /* prompt tokens one prefill iteration takes at most */
    int max_waiting;         /* queued sequences beyond which submit refuses (overload) */
} prs_fake_opts;

/* The figures /metrics shows. */
typedef struct prs_fake_stats {
    int running, waiting;
    double kv_usage; /* share of the KV cache the running sequences hold, 0..1 */
    int mhz;         /* the clock of the last iteration */
    unsigned long prompt_tokens, generation_tokens, finished;
    double energy_j;               /* model joules since start, idle included */
    prs_prom_hist ttft, tpot, e2e; /* model seconds */
} prs_fake_stats;

/* Start the engine thread. PRS_EINVAL naming the option when one is out of range (tp leaving
 * no room for the weights, a clock outside the GPU's range, speedup <= 0, limits < 1). */
int prs__fake_engine_new(const prs_fake_opts *o, prs_fake_engine **out, prs_error *err);
/* Stop the thread and free everything; sequences still held are freed too. */
void prs__fake_engine_free(prs_fake_engine *e);

/* Queue a request of prompt_tokens (>= 1) generating out_tokens (>= 1). PRS_ERANGE when
 * max_waiting sequences already wait (the caller answers 503). *out is released with
 * prs__fake_release, always exactly once. */
int prs__fake_submit(prs_fake_engine *e, long prompt_tokens, long out_tokens, prs_fake_seq **out,
                     prs_error *err);
/* Block until the sequence holds more than seen tokens, is finished, or timeout_s passed;
 * returns the tokens it holds now; *done is 1 once all are generated. */
long prs__fake_wait(prs_fake_engine *e, prs_fake_seq *s, long seen, double timeout_s, int *done);
/* The caller is done with s (finished, or its client went away: it leaves the batch). */
void prs__fake_release(prs_fake_engine *e, prs_fake_seq *s);

void prs__fake_stats(prs_fake_engine *e, prs_fake_stats *out);

#endif
