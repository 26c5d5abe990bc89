/* Choosing an instance (router_pick.h): DynamoLLM's rule, least predicted energy among the
 * instances that have room, with the cost model of src/infer pricing each candidate at its own
 * TP, clock and batch; and the history predictor of output lengths. */
#include "router_pick.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct history {
    pthread_mutex_t mu;
    long default_out;
    double sum[3];
    unsigned long n[3];
} history;

static long history_predict(void *ctx, int in_class, long prompt_tokens, long max_tokens)
{
    (void)prompt_tokens;
    history *h = ctx;
    if (max_tokens > 0) return max_tokens;
    pthread_mutex_lock(&h->mu);
    long out =
        h->n[in_class] ? (long)(h->sum[in_class] / (double)h->n[in_class] + 0.5) : h->default_out;
    pthread_mutex_unlock(&h->mu);
    return out < 1 ? 1 : out;
}

static void history_observe(void *ctx, int in_class, long prompt_tokens, long out_tokens)
{
    (void)prompt_tokens;
    history *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->sum[in_class] += (double)out_tokens;
    h->n[in_class]++;
    pthread_mutex_unlock(&h->mu);
}

int prs__router_history_new(long default_out_tokens, prs_router_predictor *out, prs_error *err)
{
    history *h = calloc(1, sizeof *h);
    if (h == NULL) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    pthread_mutex_init(&h->mu, NULL);
    h->default_out = default_out_tokens;
    *out = (prs_router_predictor){h, history_predict, history_observe};
    return 0;
}

void prs__router_history_free(prs_router_predictor *p)
{
    history *h = p->ctx;
    if (h == NULL) return;
    pthread_mutex_destroy(&h->mu);
    free(h);
    p->ctx = NULL;
}

double prs__router_energy_j(const prs_router_config *c, const prs_router_instance *in, int inflight,
                            long prompt_tokens, long out_tokens)
{
    double t_s, prefill_j, decode_j;
    int batch = inflight + 1;
    prs_infer_roofline_prefill(&c->cost, in->tp, in->mhz, 1, (double)prompt_tokens, &t_s,
                               &prefill_j);
    prs_infer_roofline_decode(&c->cost, in->tp, in->mhz, batch,
                              (double)prompt_tokens + (double)out_tokens / 2, &t_s, &decode_j);
    return prefill_j + (double)out_tokens * decode_j / batch;
}

static int best_in_pool(const prs_router_config *c, const prs_router_pool *p,
                        const prs_router_load *load, const unsigned char *tried, double now_s,
                        long in_tok, long out_tok)
{
    int best = -1;
    double best_j = 0;
    for (int i = p->first; i < p->first + p->n; i++) {
        const prs_router_load *l = &load[i];
        if ((tried && tried[i]) || l->down_until_s > now_s || l->inflight >= c->inst[i].max_running)
            continue;
        double j = prs__router_energy_j(c, &c->inst[i], l->inflight, in_tok, out_tok);
        if (best < 0 || j < best_j || (j == best_j && l->inflight < load[best].inflight)) {
            best = i;
            best_j = j;
        }
    }
    return best;
}

int prs__router_pick(const prs_router_config *c, const prs_router_load *load,
                     const unsigned char *tried, double now_s, int klass, long prompt_tokens,
                     long out_tokens, int *rerouted)
{
    int home = c->pool_of_class[klass];
    for (int k = 0; k < c->npools; k++) {
        int p = (home + k) % c->npools;
        int i = best_in_pool(c, &c->pools[p], load, tried, now_s, prompt_tokens, out_tokens);
        if (i >= 0) {
            *rerouted = k > 0;
            return i;
        }
    }
    *rerouted = 0;
    return -1;
}
