/* Pools of the device-stream path (devtime.h): CUDA events and host-call records are reused, so
 * the hooks allocate nothing in steady state, and an iteration in flight gives its own back when
 * it is freed. Training thread only. */
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

prs_event *prs__client_event_get(prs_client *c)
{
    prs__client_dev *d = c->dev;
    if (d->n_free_ev > 0) return d->free_ev[--d->n_free_ev];
    prs_event *e = NULL;
    if (prs_event_new(d->stream, &e)) return NULL;
    return e;
}

void prs__client_event_put(prs_client *c, prs_event *e)
{
    prs__client_dev *d = c->dev;
    if (!e) return;
    if (d->n_free_ev == d->cap_free_ev) {
        int cap = d->cap_free_ev ? 2 * d->cap_free_ev : 256;
        prs_event **p = realloc(d->free_ev, sizeof(prs_event *) * (size_t)cap);
        if (!p) {
            prs_event_free(d->stream, e);
            return;
        }
        d->free_ev = p;
        d->cap_free_ev = cap;
    }
    d->free_ev[d->n_free_ev++] = e;
}

prs__client_hostcall *prs__client_call_get(prs_client *c)
{
    prs__client_dev *d = c->dev;
    prs__client_hostcall *h = d->free_calls;
    if (h)
        d->free_calls = h->next;
    else
        h = malloc(sizeof *h);
    if (!h) return NULL;
    memset(h, 0, sizeof *h);
    h->c = c;
    return h;
}

void prs__client_call_put(prs_client *c, prs__client_hostcall *h)
{
    if (!h) return;
    h->next = c->dev->free_calls;
    c->dev->free_calls = h;
}

prs__client_pend *prs__client_pend_new(void)
{
    prs__client_pend *p = calloc(1, sizeof *p);
    if (p) p->plan_id = -1;
    return p;
}

/* Frees p and returns its events and host calls to the pools (its end event and anchor belong
 * to the next iteration). */
void prs__client_dev_pend_free(prs_client *c, prs__client_pend *p)
{
    if (!p) return;
    prs__client_event_put(c, p->start);
    prs__client_call_put(c, p->anchor);
    for (int i = 0; i < p->n_ops; i++) {
        prs__client_event_put(c, p->ops[i].b);
        prs__client_event_put(c, p->ops[i].e);
        prs__client_call_put(c, p->ops[i].change);
    }
    for (prs__client_hostcall *h = p->closing, *n; h; h = n) {
        n = h->next;
        prs__client_call_put(c, h);
    }
    free(p->op_t0);
    free(p->op_clock);
    free(p->ops);
    free(p);
}
