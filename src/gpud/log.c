/* perseus-gpud logging: one logfmt line per event on stderr ("ts=... level=info msg=lease
 * gpu=GPU-... pid=... uid=..."), filtered by a level; and the monotonic clock. */
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpud.h"
#include "perseus/logfmt.h"

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
    va_list ap;
    va_start(ap, fmt);
    prs_logfmt_write(log_fd, names[level], fmt, ap);
    va_end(ap);
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
