/* perseus-gpud logging: one logfmt line per event on stderr ("ts=... level=info msg=lease
 * gpu=GPU-... pid=... uid=..."), filtered by a level; and the monotonic clock. */
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpud.h"

static int log_fd = 2;
static gpud_log_level log_level = GPUD_LOG_INFO;

void gpud_log_setup(int fd, gpud_log_level level)
{
    log_fd = fd;
    log_level = level;
}

int gpud_log_parse_level(const char *s, gpud_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *out = (gpud_log_level)i;
            return 0;
        }
    return PRS_EINVAL;
}

void gpud_log(gpud_log_level level, const char *fmt, ...)
{
    if (log_fd < 0 || level > log_level) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    for (size_t i = (size_t)n; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line[len++] = '\n';
    ssize_t w = write(log_fd, line, len);
    (void)w;
}

const char *gpud_logq(const char *s, char *out, size_t n)
{
    if (n < 3) return "";
    int plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 0x20) plain = 0;
    size_t o = 0;
    if (!plain) out[o++] = '"';
    for (; *s && o + 2 < n; s++)
        out[o++] = (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) ? '\'' : *s;
    if (!plain) out[o++] = '"';
    out[o] = '\0';
    return out;
}

int64_t gpud_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double gpud_now_s(void)
{
    return 1e-9 * (double)gpud_now_ns();
}
