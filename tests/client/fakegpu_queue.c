/* A stream's queue of work (fakegpu_queue.h). */
#include "fakegpu_queue.h"

#include <stdlib.h>
#include <string.h>

int fakegpu_queue_init(fakegpu_queue *q, size_t elem, size_t cap)
{
    memset(q, 0, sizeof *q);
    if (!elem || !cap || !(q->buf = malloc(elem * cap))) return -1;
    q->elem = elem;
    q->cap = cap;
    return 0;
}

static unsigned char *slot(const fakegpu_queue *q, size_t i)
{
    return q->buf + ((q->head + i) % q->cap) * q->elem;
}

int fakegpu_queue_push(fakegpu_queue *q, const void *e)
{
    if (q->len == q->cap) {
        unsigned char *b = malloc(2 * q->cap * q->elem);
        if (!b) return -1;
        for (size_t i = 0; i < q->len; i++)
            memcpy(b + i * q->elem, slot(q, i), q->elem);
        free(q->buf);
        q->buf = b;
        q->head = 0;
        q->cap *= 2;
    }
    memcpy(slot(q, q->len), e, q->elem);
    q->len++;
    return 0;
}

int fakegpu_queue_pop(fakegpu_queue *q, void *out)
{
    if (!q->len) return 0;
    memcpy(out, slot(q, 0), q->elem);
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return 1;
}

void fakegpu_queue_free(fakegpu_queue *q)
{
    free(q->buf);
    memset(q, 0, sizeof *q);
}
