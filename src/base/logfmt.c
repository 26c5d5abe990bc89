/* A logfmt line (perseus/logfmt.h): part of the base library, shared by both daemons. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "perseus/logfmt.h"

void prs_logfmt_write(int fd, const char *level, const char *fmt, va_list ap)
{
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level);
    if (n < 0 || (size_t)n >= sizeof line - 2) return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    for (size_t i = (size_t)n; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line[len++] = '\n';
    ssize_t w = write(fd, line, len);
    (void)w;
}
