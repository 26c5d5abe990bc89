/* load_server: a phase's errors (counted, the first few shown) and its deadlines. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>

#include "load_server.h"

void ls_phase_begin(gen *g, const char *name, errs *e)
{
    g->phase = name;
    g->err = e;
}

long ls_total_errors(const errs *e)
{
    return e->http + e->transport + e->check;
}

void ls_show_error(gen *g, const char *fmt, ...)
{
    if (g->err->shown > ERRORS_SHOWN) return;
    if (g->err->shown++ == ERRORS_SHOWN) {
        fprintf(stderr, "load_server: %s: further errors are counted, not shown\n", g->phase);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "load_server: %s: ", g->phase);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *ls_method_name(int m)
{
    return m == M_POST ? "POST" : m == M_DELETE ? "DELETE" : "GET";
}

/* Count and show a failed request; 1 if x failed (transport error or status not 2xx). */
int ls_request_failed(gen *g, xfer *x)
{
    if (x->rc != CURLE_OK) {
        g->err->transport++;
        ls_show_error(g, "%s %s: %s", ls_method_name(x->method), x->path,
                      x->err[0] ? x->err : curl_easy_strerror(x->rc));
        return 1;
    }
    if (x->status < 200 || x->status > 299) {
        g->err->http++;
        ls_show_error(g, "%s %s: HTTP %ld %.300s", ls_method_name(x->method), x->path, x->status,
                      x->resp.p ? x->resp.p : "");
        return 1;
    }
    return 0;
}

void ls_check_failed(gen *g, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g->err->check++;
    ls_show_error(g, "%s", msg);
}

/* A deadline passed, or the user stopped us: say which and fail the phase. */
int ls_over_time(gen *g, double deadline, const char *what)
{
    double t = ls_now_s();
    if (g_stop) {
        fprintf(stderr, "load_server: %s: interrupted\n", g->phase);
        return 1;
    }
    if (t > g->t_start + g->watchdog_s) {
        fprintf(stderr, "load_server: %s: watchdog: the whole run is over %.0f s\n", g->phase,
                g->watchdog_s);
        return 1;
    }
    if (t > deadline) {
        fprintf(stderr, "load_server: %s: deadline: %s\n", g->phase, what);
        return 1;
    }
    return 0;
}

void ls_print_errs(const char *what, const errs *e)
{
    printf("%s: %ld HTTP, %ld transport, %ld checks", what, e->http, e->transport, e->check);
}
