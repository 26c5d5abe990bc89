/* An indexed binary min-heap of event times keyed by small integer ids (evheap.c): the
 * cluster's instances by the time of their next event. Setting an id's time, removing an id
 * and renaming one (the cluster's instance array is compacted by moving the last into a hole)
 * are O(log n); the earliest is O(1). Internal to src/infer. */
#ifndef PRS_INFER_EVHEAP_H
#define PRS_INFER_EVHEAP_H

typedef struct prs__infer_evheap {
    int *heap;   /* ids, heap-ordered by key */
    int *pos;    /* pos[id]: its index in heap, -1 when absent */
    double *key; /* key[id] */
    int n, cap;  /* ids in the heap; ids are < cap */
} prs__infer_evheap;

/* Room for ids < cap (grows, keeping the contents): 0 or PRS_ENOMEM. */
int prs__infer_evheap_reserve(prs__infer_evheap *h, int cap);
void prs__infer_evheap_free(prs__infer_evheap *h);
/* Insert id with key, or move it to key. */
void prs__infer_evheap_set(prs__infer_evheap *h, int id, double key);
void prs__infer_evheap_remove(prs__infer_evheap *h, int id);
/* The id `from` takes the name `to` (absent before). */
void prs__infer_evheap_rename(prs__infer_evheap *h, int from, int to);
/* The id of the least key, or -1 when empty. */
int prs__infer_evheap_top(const prs__infer_evheap *h);

#endif
