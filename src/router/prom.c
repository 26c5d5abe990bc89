/* Prometheus text exposition (prom.h): the few pieces both HTTP programs need, so that their
 * /metrics pages follow one format (cumulative buckets, escaped labels, HELP and TYPE lines). */
#include "prom.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const double bucket_le_s[PRS_PROM_NBUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0};

void prs__prom_hist_observe(prs_prom_hist *h, double value_s)
{
    for (int i = 0; i < PRS_PROM_NBUCKETS; i++) {
        if (value_s <= bucket_le_s[i]) {
            h->count[i]++;
            break;
        }
    }
    h->total++;
    h->sum += value_s;
}

static int grow(prs_prom_buf *b, size_t need)
{
    if (b->failed) return -1;
    if (b->len + need + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1)
        cap *= 2;
    char *t = realloc(b->text, cap);
    if (t == NULL) {
        b->failed = 1;
        return -1;
    }
    b->text = t;
    b->cap = cap;
    return 0;
}

void prs__prom_printf(prs_prom_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(b, (size_t)n) != 0) return;
    va_start(ap, fmt);
    vsnprintf(b->text + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void prs__prom_header(prs_prom_buf *b, const char *name, const char *type, const char *help)
{
    prs__prom_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prs__prom_label_value(prs_prom_buf *b, const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '\\')
            prs__prom_printf(b, "\\\\");
        else if (*p == '"')
            prs__prom_printf(b, "\\\"");
        else if (*p == '\n')
            prs__prom_printf(b, "\\n");
        else
            prs__prom_printf(b, "%c", *p);
    }
}

void prs__prom_hist_write(prs_prom_buf *b, const char *name, const char *labels,
                          const prs_prom_hist *h)
{
    const char *sep = labels[0] ? "," : "";
    unsigned long cum = 0;
    for (int i = 0; i < PRS_PROM_NBUCKETS; i++) {
        cum += h->count[i];
        prs__prom_printf(b, "%s_bucket{%s%sle=\"%g\"} %lu\n", name, labels, sep, bucket_le_s[i],
                         cum);
    }
    prs__prom_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %lu\n", name, labels, sep, h->total);
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    prs__prom_printf(b, "%s_sum%s%s%s %.9g\n", name, open, labels, close, h->sum);
    prs__prom_printf(b, "%s_count%s%s%s %lu\n", name, open, labels, close, h->total);
}
