/* Indexed binary min-heap (evheap.h). */
#include "evheap.h"

#include <stdlib.h>

#include "perseus/error.h"

int prs__infer_evheap_reserve(prs__infer_evheap *h, int cap)
{
    if (cap <= h->cap) return PRS_OK;
    int *heap = realloc(h->heap, (size_t)cap * sizeof *heap);
    if (heap) h->heap = heap;
    int *pos = realloc(h->pos, (size_t)cap * sizeof *pos);
    if (pos) h->pos = pos;
    double *key = realloc(h->key, (size_t)cap * sizeof *key);
    if (key) h->key = key;
    if (!heap || !pos || !key) return PRS_ENOMEM;
    for (int i = h->cap; i < cap; i++)
        h->pos[i] = -1;
    h->cap = cap;
    return PRS_OK;
}

void prs__infer_evheap_free(prs__infer_evheap *h)
{
    free(h->heap);
    free(h->pos);
    free(h->key);
    *h = (prs__infer_evheap){0};
}

static void place(prs__infer_evheap *h, int at, int id)
{
    h->heap[at] = id;
    h->pos[id] = at;
}

static void sift_up(prs__infer_evheap *h, int at)
{
    int id = h->heap[at];
    while (at > 0) {
        int parent = (at - 1) / 2;
        if (h->key[h->heap[parent]] <= h->key[id]) break;
        place(h, at, h->heap[parent]);
        at = parent;
    }
    place(h, at, id);
}

static void sift_down(prs__infer_evheap *h, int at)
{
    int id = h->heap[at];
    for (;;) {
        int c = 2 * at + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->key[h->heap[c + 1]] < h->key[h->heap[c]]) c++;
        if (h->key[h->heap[c]] >= h->key[id]) break;
        place(h, at, h->heap[c]);
        at = c;
    }
    place(h, at, id);
}

void prs__infer_evheap_set(prs__infer_evheap *h, int id, double key)
{
    h->key[id] = key;
    if (h->pos[id] < 0) {
        place(h, h->n++, id);
        sift_up(h, h->n - 1);
        return;
    }
    sift_up(h, h->pos[id]);
    sift_down(h, h->pos[id]);
}

void prs__infer_evheap_remove(prs__infer_evheap *h, int id)
{
    int at = h->pos[id];
    if (at < 0) return;
    h->pos[id] = -1;
    int last = h->heap[--h->n];
    if (at == h->n) return;
    place(h, at, last);
    sift_up(h, at);
    sift_down(h, h->pos[last]);
}

void prs__infer_evheap_rename(prs__infer_evheap *h, int from, int to)
{
    int at = h->pos[from];
    h->key[to] = h->key[from];
    h->pos[from] = -1;
    if (at >= 0) place(h, at, to);
}

int prs__infer_evheap_top(const prs__infer_evheap *h)
{
    return h->n > 0 ? h->heap[0] : -1;
}
