/* load_server: the generator's small helpers: the monotonic clock, signals, memory, growable text
 * and percentiles. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "load_server.h"

double ls_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

volatile sig_atomic_t g_stop;  /* SIGINT/SIGTERM: stop at the next loop turn */
volatile sig_atomic_t g_child; /* the server's pid, for the last-resort alarm */
void ls_on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}
void ls_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "load_server: watchdog: the program did not stop in time; "
                              "killing perseusd\n";
    if (write(2, msg, sizeof msg - 1) < 0) { /* nothing to do */
    }
    if (g_child > 0) kill((pid_t)g_child, SIGKILL);
    _exit(1);
}

void ls_oom(void)
{
    fputs("load_server: out of memory\n", stderr);
    if (g_child > 0) kill((pid_t)g_child, SIGTERM);
    exit(1);
}

void *ls_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) ls_oom();
    return p;
}

/* ---- growable text ---- */

static void buf_reserve(buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) ls_oom();
    b->p = p;
    b->cap = cap;
}

void ls_buf_add(buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void ls_buf_printf(buf *b, const char *fmt, ...)
{
    for (;;) {
        buf_reserve(b, 64);
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) ls_oom();
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        buf_reserve(b, (size_t)n);
    }
}

void ls_buf_clear(buf *b)
{
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}

int ls_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ls_pct(const double *v, long n, double p)
{
    if (n == 0) return 0;
    long i = (long)(p * (double)(n - 1) + 0.5);
    return v[i];
}
