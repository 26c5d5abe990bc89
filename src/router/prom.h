/* Prometheus text exposition (format 0.0.4) for the router and the fake serving instance
 * (prom.c): a growing text buffer and a fixed-bucket latency histogram.
 *
 * The caller serialises access (the histograms live inside its own locked state); nothing here
 * locks. Label values are escaped as the format requires (backslash, quote, newline). */
#ifndef PRS_ROUTER_PROM_H
#define PRS_ROUTER_PROM_H

#include <stddef.h>

/* Bucket upper bounds (seconds) shared by every latency histogram: 1 ms .. 60 s. */
#define PRS_PROM_NBUCKETS 16

typedef struct prs_prom_hist {
    unsigned long count[PRS_PROM_NBUCKETS]; /* non-cumulative: count[i] in (le[i-1], le[i]] */
    unsigned long total;                    /* every observation, the +Inf bucket */
    double sum;
} prs_prom_hist;

typedef struct prs_prom_buf {
    char *text; /* NUL-terminated; malloc'd, the owner frees it */
    size_t len, cap;
    int failed; /* memory ran out: text holds a prefix */
} prs_prom_buf;

void prs__prom_hist_observe(prs_prom_hist *h, double value_s);

/* Append printf-style text. */
void prs__prom_printf(prs_prom_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "# HELP name help\n# TYPE name type\n". */
void prs__prom_header(prs_prom_buf *b, const char *name, const char *type, const char *help);
/* Append value escaped as a label value (no quotes added). */
void prs__prom_label_value(prs_prom_buf *b, const char *value);
/* The series of a histogram: name_bucket{labels,le=...}, name_sum, name_count. labels is the
 * already-formatted label list without braces ('pool="a",instance="b"'), "" for none. */
void prs__prom_hist_write(prs_prom_buf *b, const char *name, const char *labels,
                          const prs_prom_hist *h);

#endif
