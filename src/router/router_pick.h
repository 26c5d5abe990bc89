/* Where a request goes (router_pick.c): its DynamoLLM class from its prompt's length and a
 * predicted output length, and the instance that serves it with the least predicted energy
 * among those with capacity, in its class's pool first and then in the pools after it.
 *
 * The output predictor is pluggable (prs_router_predictor). The one shipped takes max_tokens
 * when the request gives it, and otherwise the running mean of the outputs seen for requests of
 * the same input class (the config's default before the first one). */
#ifndef PRS_ROUTER_PICK_H
#define PRS_ROUTER_PICK_H

#include "router_config.h"

typedef struct prs_router_predictor {
    void *ctx;
    /* Predicted output tokens (>= 1) of a request of in_class with max_tokens (0: none). */
    long (*predict)(void *ctx, int in_class, long prompt_tokens, long max_tokens);
    /* A request of in_class finished with out_tokens; called under no lock of the caller's,
     * so the predictor serialises itself. */
    void (*observe)(void *ctx, int in_class, long prompt_tokens, long out_tokens);
} prs_router_predictor;

/* The history predictor; free with prs__router_history_free. */
int prs__router_history_new(long default_out_tokens, prs_router_predictor *out, prs_error *err);
void prs__router_history_free(prs_router_predictor *p);

/* The live state of one instance the choice reads (the caller holds its lock). */
typedef struct prs_router_load {
    int inflight;        /* requests sent and not finished */
    double down_until_s; /* skipped until this time (monotonic seconds) after a failure */
} prs_router_load;

/* Predicted energy (J) of one request of prompt_tokens and out_tokens sent to instance in,
 * which holds inflight requests: its prefill alone, then its share of out_tokens decode steps
 * of a batch of inflight + 1 sequences, at the instance's TP and clock (the cost model). */
double prs__router_energy_j(const prs_router_config *c, const prs_router_instance *in, int inflight,
                            long prompt_tokens, long out_tokens);

/* The instance for a request of class klass: the least predicted energy among the instances of
 * the class's pool that are up, untried and below their max_running, then the same in each
 * pool after it (wrapping around); fewer requests in flight break ties. -1 when none has
 * capacity. tried[i] (NULL: none) marks instances this request already failed on. *rerouted is 1
 * when the instance is outside the class's pool. */
int prs__router_pick(const prs_router_config *c, const prs_router_load *load,
                     const unsigned char *tried, double now_s, int klass, long prompt_tokens,
                     long out_tokens, int *rerouted);

#endif
