/* perseusd's log: one line per event, key=value (perseus/logfmt.h), to the configured
 * descriptor at the configured level. */
#include <stdarg.h>

#include "server_int.h"

void srv_log(prs_server *s, prs_log_level level, const char *fmt, ...)
{
    if (s->cfg.log_fd < 0 || level > s->cfg.log_level) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    va_list ap;
    va_start(ap, fmt);
    prs_logfmt_write(s->cfg.log_fd, names[level], fmt, ap);
    va_end(ap);
}

const char *srv_kv_quote(const char *in, char *out, size_t n)
{
    size_t o = 0;
    out[o++] = '"';
    for (; *in && o + 2 < n; in++)
        out[o++] = (*in == '"' || *in == '\\') ? '\'' : *in;
    out[o++] = '"';
    out[o] = '\0';
    return out;
}
