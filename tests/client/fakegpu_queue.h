/* The queue of a fake stream's work (fake_cuda.c): a ring of fixed-size entries that grows by
 * doubling, first in first out. No lock of its own: the stream's mutex guards it. */
#ifndef PRS_FAKEGPU_QUEUE_H
#define PRS_FAKEGPU_QUEUE_H

#include <stddef.h>

typedef struct fakegpu_queue {
    unsigned char *buf;
    size_t elem;           /* bytes an entry */
    size_t cap, head, len; /* entries */
} fakegpu_queue;

/* An empty queue of entries of elem bytes with room for cap of them; -1 when out of memory. */
int fakegpu_queue_init(fakegpu_queue *q, size_t elem, size_t cap);
/* Append a copy of *e (growing the ring when full); -1 when out of memory (nothing appended). */
int fakegpu_queue_push(fakegpu_queue *q, const void *e);
/* Copy the oldest entry to *out and remove it; 0 when the queue is empty (out untouched). */
int fakegpu_queue_pop(fakegpu_queue *q, void *out);
void fakegpu_queue_free(fakegpu_queue *q);

#endif
