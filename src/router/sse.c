/* Counting token events in a server-sent-events stream (sse.h), so the router can time them as
 * they pass through without holding the stream. */
#include "sse.h"

#include <string.h>

/* 1 when the line just ended is a token event. */
static int is_event(const prs_sse_scan *s)
{
    size_t n = s->line_len < PRS_SSE_HEAD ? s->line_len : PRS_SSE_HEAD;
    if (n < 5 || memcmp(s->head, "data:", 5) != 0) return 0;
    int sentinel = (s->line_len == 12 && memcmp(s->head, "data: [DONE]", 12) == 0) ||
                   (s->line_len == 11 && memcmp(s->head, "data:[DONE]", 11) == 0);
    return !sentinel;
}

long prs__sse_feed(prs_sse_scan *s, const char *p, size_t n, void (*on_event)(void *cls), void *cls)
{
    long events = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            if (is_event(s)) {
                events++;
                if (on_event) on_event(cls);
            }
            s->line_len = 0;
        } else if (p[i] != '\r') {
            if (s->line_len < PRS_SSE_HEAD) s->head[s->line_len] = p[i];
            s->line_len++;
        }
    }
    return events;
}
