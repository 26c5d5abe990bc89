/* A minimal OpenAI-style completions backend for measuring perseus-router (sse_serve.c): one
 * thread, epoll, HTTP/1.1 with keep-alive, every POST answered with max_tokens (the body's,
 * default_tokens when absent) token events, the first ttft_s after the request and the next
 * gap_s apart, as a server-sent-events stream ("stream": true) or a whole JSON object. No cost
 * model and no batching: its latency is known exactly, so what a router adds stands out, and it
 * holds tens of thousands of streams. A body with "sse_gap_ms" (any value) gets its events
 * back to back instead (a flood, for tests of slow readers). Used by bench/sse_backend and the
 * router's tests. */
#ifndef PRS_BENCH_SSE_SERVE_H
#define PRS_BENCH_SSE_SERVE_H

typedef struct sse_serve sse_serve;

typedef struct sse_serve_opts {
    double ttft_s, gap_s;
    long default_tokens;
    int max_conns; /* connections held at once; more are refused (closed at once) */
} sse_serve_opts;

/* Listen on 127.0.0.1:port (0: a free one) and serve on a thread of its own; *port_out gets the
 * port. 0, or -1 with errno. */
int sse_serve_start(int port, const sse_serve_opts *o, sse_serve **out, int *port_out);
void sse_serve_stop(sse_serve *s);
/* Streams being sent now (until their last byte is sent); streams whose client left before
 * their last byte; requests answered. */
long sse_serve_open_streams(sse_serve *s);
long sse_serve_abandoned(sse_serve *s);
long sse_serve_requests(sse_serve *s);

#endif
