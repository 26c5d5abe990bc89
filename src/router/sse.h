/* Token events in a server-sent-events stream (sse.c), as OpenAI-compatible engines stream
 * completions: every "data:" line but "data: [DONE]" is one event. The scanner keeps only the
 * start of the current line, so it takes the stream in pieces of any size, split anywhere, in
 * constant memory; lines end at "\n" ("\r\n" too). */
#ifndef PRS_ROUTER_SSE_H
#define PRS_ROUTER_SSE_H

#include <stddef.h>

#define PRS_SSE_HEAD 16 /* bytes of a line kept: enough to tell "data: [DONE]" */

typedef struct prs_sse_scan {
    size_t line_len;
    char head[PRS_SSE_HEAD];
} prs_sse_scan;

/* Scan p[n]; on_event(cls) is called as each event's line ends. Returns the events seen. */
long prs__sse_feed(prs_sse_scan *s, const char *p, size_t n, void (*on_event)(void *cls),
                   void *cls);

#endif
