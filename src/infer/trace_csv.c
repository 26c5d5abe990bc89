/* Azure LLM inference trace CSV reader (trace.h).
 *
 * The published traces have one request a line: TIMESTAMP,ContextTokens,GeneratedTokens. The
 * 2023 files write "2023-11-16 18:17:03.9799600" (UTC, seven fraction digits); the week-long
 * 2024 files "2024-05-10 00:00:00.009930+00:00" with a varying number of fraction digits. Both
 * are read by one strict parser: a malformed row is an error naming the file and line, never
 * skipped, because a silently shorter trace would understate the load. Rows out of time order
 * are sorted (stable) rather than refused: the published files are sorted, and a concatenation
 * of them need not be. Memory grows geometrically with the rows, bounded by
 * PRS_INFER_TRACE_MAX_REQS. */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_CHARS 4096

/* Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse). */
static long days_from_civil(long y, int m, int d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153L * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* n decimal digits at s into *v; 0 or -1. */
static int digits(const char *s, size_t n, int *v)
{
    int x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return 0;
}

static int days_in_month(int y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 ? 28 + leap : dm[m - 1];
}

int prs_infer_parse_timestamp(const char *s, size_t len, double *epoch_s)
{
    int y, mo, d, h, mi, se;
    if (len < 19 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
        digits(s + 8, 2, &d) || (s[10] != ' ' && s[10] != 'T') || digits(s + 11, 2, &h) ||
        s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &se))
        return PRS_EPARSE;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 60)
        return PRS_EPARSE;
    size_t i = 19;
    double frac = 0, scale = 0.1;
    if (i < len && s[i] == '.') {
        i++;
        size_t first = i;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, scale *= 0.1)
            frac += (s[i] - '0') * scale;
        if (i == first) return PRS_EPARSE;
    }
    long offset_s = 0;
    if (i < len && s[i] == 'Z') {
        i++;
    } else if (i < len && (s[i] == '+' || s[i] == '-')) {
        int oh, om;
        if (len - i != 6 || digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
            digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return PRS_EPARSE;
        offset_s = (s[i] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
        i = len;
    }
    if (i != len) return PRS_EPARSE;
    double days = (double)days_from_civil(y, mo, d);
    *epoch_s = days * 86400.0 + h * 3600.0 + mi * 60.0 + se + frac - (double)offset_s;
    return PRS_OK;
}

/* A token count: digits only, within [min, PRS_INFER_TRACE_MAX_TOKENS]. */
static int parse_tokens(const char *s, size_t len, int min, int32_t *out)
{
    if (len == 0 || len > 9) return -1;
    int v;
    if (digits(s, len, &v) || v < min || v > PRS_INFER_TRACE_MAX_TOKENS) return -1;
    *out = v;
    return 0;
}

enum { COL_TIME, COL_IN, COL_OUT, NCOL };

typedef struct csv_reader {
    const char *path;
    FILE *f;
    char line[LINE_MAX_CHARS + 2];
    long lineno;
    int col[NCOL]; /* field index of each column */
    int nfields;
} csv_reader;

/* Next line into r->line without its end of line: 1, 0 at end of file, <0 on error. */
static int next_line(csv_reader *r, prs_error *err)
{
    if (!fgets(r->line, sizeof r->line, r->f))
        return ferror(r->f) ? prs_error_set(err, PRS_EIO, "%s: read error", r->path) : 0;
    r->lineno++;
    size_t n = strlen(r->line);
    if (n > 0 && r->line[n - 1] == '\n')
        r->line[--n] = 0;
    else if (!feof(r->f))
        return prs_error_set(err, PRS_EPARSE, "%s:%ld: line longer than %d characters", r->path,
                             r->lineno, LINE_MAX_CHARS);
    if (n > 0 && r->line[n - 1] == '\r') r->line[--n] = 0;
    return 1;
}

/* Split r->line at commas in place: up to max fields; returns the count (max+1 if more). */
static int split(char *line, const char **f, size_t *len, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *c = strchr(p, ',');
        if (n < max) {
            f[n] = p;
            len[n] = c ? (size_t)(c - p) : strlen(p);
        }
        n++;
        if (!c) break;
        p = c + 1;
    }
    return n;
}

static int read_header(csv_reader *r, prs_error *err)
{
    static const char *const names[NCOL] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
    int rc = next_line(r, err);
    if (rc < 0) return rc;
    if (rc == 0) return prs_error_set(err, PRS_EPARSE, "%s: empty file (no header)", r->path);
    const char *f[64];
    size_t len[64];
    int n = split(r->line, f, len, 64);
    if (n > 64) return prs_error_set(err, PRS_EPARSE, "%s:1: more than 64 columns", r->path);
    for (int c = 0; c < NCOL; c++) {
        r->col[c] = -1;
        for (int i = 0; i < n; i++)
            if (len[i] == strlen(names[c]) && memcmp(f[i], names[c], len[i]) == 0) r->col[c] = i;
        if (r->col[c] < 0)
            return prs_error_set(err, PRS_EPARSE, "%s:1: header lacks column %s", r->path,
                                 names[c]);
    }
    r->nfields = n;
    return PRS_OK;
}

static int parse_row(csv_reader *r, prs_infer_req *q, double *epoch_s, prs_error *err)
{
    const char *f[64];
    size_t len[64];
    int n = split(r->line, f, len, 64);
    if (n != r->nfields)
        return prs_error_set(err, PRS_EPARSE, "%s:%ld: %d fields, the header has %d", r->path,
                             r->lineno, n, r->nfields);
    int c = r->col[COL_TIME];
    if (prs_infer_parse_timestamp(f[c], len[c], epoch_s))
        return prs_error_set(
            err, PRS_EPARSE,
            "%s:%ld: bad TIMESTAMP '%.*s' (want YYYY-MM-DD HH:MM:SS[.frac][+HH:MM])", r->path,
            r->lineno, (int)(len[c] < 64 ? len[c] : 64), f[c]);
    c = r->col[COL_IN];
    if (parse_tokens(f[c], len[c], 1, &q->in_tokens))
        return prs_error_set(
            err, PRS_EPARSE, "%s:%ld: bad ContextTokens '%.*s' (want an integer in 1..%d)", r->path,
            r->lineno, (int)(len[c] < 64 ? len[c] : 64), f[c], PRS_INFER_TRACE_MAX_TOKENS);
    c = r->col[COL_OUT];
    if (parse_tokens(f[c], len[c], 1, &q->out_tokens))
        return prs_error_set(
            err, PRS_EPARSE, "%s:%ld: bad GeneratedTokens '%.*s' (want an integer in 1..%d)",
            r->path, r->lineno, (int)(len[c] < 64 ? len[c] : 64), f[c], PRS_INFER_TRACE_MAX_TOKENS);
    return PRS_OK;
}

/* Stable merge sort by arrival (equal times keep file order); a buffer as large as the trace is
 * needed only when the file is out of order. */
int prs__infer_trace_sort(prs_infer_trace *t, const char *path, prs_error *err)
{
    prs_infer_req *tmp = malloc(t->n * sizeof *tmp);
    if (!tmp) return prs_error_set(err, PRS_ENOMEM, "%s: out of memory sorting", path);
    prs_infer_req *a = t->reqs, *b = tmp;
    for (size_t w = 1; w < t->n; w *= 2) {
        for (size_t lo = 0; lo < t->n; lo += 2 * w) {
            size_t mid = lo + w < t->n ? lo + w : t->n;
            size_t hi = lo + 2 * w < t->n ? lo + 2 * w : t->n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = a[j].arrival_s < a[i].arrival_s ? a[j++] : a[i++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        prs_infer_req *s = a;
        a = b;
        b = s;
    }
    if (a != t->reqs) memcpy(t->reqs, a, t->n * sizeof *a);
    free(tmp);
    return PRS_OK;
}

static int append(prs_infer_trace *t, size_t *cap, const prs_infer_req *q, const char *path,
                  prs_error *err)
{
    if (t->n == *cap) {
        if ((long)*cap >= PRS_INFER_TRACE_MAX_REQS)
            return prs_error_set(err, PRS_ERANGE, "%s: more than %ld requests", path,
                                 PRS_INFER_TRACE_MAX_REQS);
        size_t nc = *cap ? *cap * 2 : 4096;
        prs_infer_req *p = realloc(t->reqs, nc * sizeof *p);
        if (!p) return prs_error_set(err, PRS_ENOMEM, "%s: out of memory", path);
        t->reqs = p;
        *cap = nc;
    }
    t->reqs[t->n++] = *q;
    return PRS_OK;
}

static int read_rows(csv_reader *r, prs_infer_trace *t, int *sorted, prs_error *err)
{
    size_t cap = 0;
    double first = 0, prev = 0;
    int rc;
    while ((rc = next_line(r, err)) > 0) {
        if (r->line[0] == 0)
            return prs_error_set(err, PRS_EPARSE, "%s:%ld: empty line", r->path, r->lineno);
        prs_infer_req q = {0, 0, 0};
        double epoch = 0;
        if ((rc = parse_row(r, &q, &epoch, err))) return rc;
        if (t->n == 0) first = epoch;
        if (t->n > 0 && epoch < prev) *sorted = 0;
        if (epoch < first) first = epoch;
        prev = epoch;
        q.arrival_s = epoch;
        if ((rc = append(t, &cap, &q, r->path, err))) return rc;
    }
    if (rc < 0) return rc;
    if (t->n == 0) return prs_error_set(err, PRS_EPARSE, "%s: no requests", r->path);
    t->start_epoch_s = first;
    for (size_t i = 0; i < t->n; i++)
        t->reqs[i].arrival_s -= first;
    return PRS_OK;
}

int prs_infer_trace_load(const char *path, prs_infer_trace *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return prs_error_set(err, PRS_EIO, "%s: %s", path, strerror(errno));
    int rc = prs_infer_trace_read(f, path, out, err);
    fclose(f);
    return rc;
}

int prs_infer_trace_read(FILE *f, const char *name, prs_infer_trace *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    csv_reader r = {.path = name, .f = f};
    int sorted = 1;
    int rc = read_header(&r, err);
    if (!rc) rc = read_rows(&r, out, &sorted, err);
    if (rc) {
        prs_infer_trace_free(out);
        return rc;
    }
    if (!sorted && (rc = prs__infer_trace_sort(out, name, err))) prs_infer_trace_free(out);
    return rc;
}

void prs_infer_trace_free(prs_infer_trace *t)
{
    if (!t) return;
    free(t->reqs);
    t->reqs = NULL;
    t->n = 0;
}
