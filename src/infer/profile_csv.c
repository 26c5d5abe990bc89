/* Inference profile CSV reader: prs_infer_profile_parse and _load (profile.h; the format in
 * docs/inference.md, "Profiles").
 *
 * Two passes. The first walks the bounded buffer line by line (a line is copied into a scratch
 * buffer, split on commas, fields trimmed), checks each field and keeps a compact row. The
 * second sorts the rows by (tp, clock, phase, batch, tokens), which puts duplicates side by side
 * and every (tp, clock, phase) grid in row-major order, and builds the tables: the TP degrees,
 * the clocks, each tp's capacity and each (tp, clock)'s idle power and prefill and decode grids.
 * A grid must be full (every batch at every tokens value), so a sorted phase block maps onto
 * it one to one and a hole is found, and named, by walking the block.
 *
 * Fields are split as every CSV of the project is (src/base/csvfield.c: trimmed, optionally
 * quoted); numbers are plain decimal (no hex, no inf or nan). Every error is one line, "NAME:LINE:
 * problem", or "NAME: problem" for what concerns the file as a whole (a missing row, an incomplete
 * grid). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csvfield.h"
#include "readfile.h"
#include "perseus/numfmt.h"
#include "profile_int.h"

#define NCOLS 9
#define MAX_FIELDS 16 /* fields kept per line; more are only counted */

enum col { C_MODEL, C_GPU, C_TP, C_FREQ, C_PHASE, C_BATCH, C_TOKENS, C_TIME, C_ENERGY };
static const char *const COL_NAMES[NCOLS] = {"model", "gpu",    "tp",     "freq_mhz", "phase",
                                             "batch", "tokens", "time_s", "energy_j"};
static const char HEADER_TEXT[] = "model,gpu,tp,freq_mhz,phase,batch,tokens,time_s,energy_j";

typedef prs__infer_row row;

typedef struct reader {
    const char *name;
    prs_error *err;
    char *buf;
    size_t bufcap;
    row *rows;
    size_t nrows, cap;
    int model_line;
    prs_infer_profile *p;
} reader;

static int fail(prs_error *err, const char *name, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(prs_error *err, const char *name, int line, const char *fmt, ...)
{
    if (!err) return PRS_EPARSE;
    char problem[PRS_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    if (line > 0) return prs_error_set(err, PRS_EPARSE, "%s:%d: %s", name, line, problem);
    return prs_error_set(err, PRS_EPARSE, "%s: %s", name, problem);
}

/* ---- fields ---- */

/* An integer in [min, max] (perseus/numfmt.h's strict parser); 0 or -1. */
static int parse_long(const char *s, long min, long max, long *out)
{
    long v;
    if (prs_num_parse_long(s, &v) != 0 || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= PRS_INFER_NAME_MAX) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.'))
            return 0;
    return 1;
}

/* ---- rows ---- */

static int parse_header(reader *r, char **fields, int nfields, int line, int *colmap)
{
    char ex[200];
    int seen[NCOLS] = {0};
    int stored = nfields < MAX_FIELDS ? nfields : MAX_FIELDS;
    for (int i = 0; i < stored; i++) {
        int c = -1;
        for (int k = 0; k < NCOLS; k++)
            if (strcmp(fields[i], COL_NAMES[k]) == 0) c = k;
        if (c < 0)
            return fail(r->err, r->name, line, "unknown column '%s' (expected %s)",
                        prs__csv_excerpt(ex, sizeof ex, fields[i]), HEADER_TEXT);
        if (seen[c]) return fail(r->err, r->name, line, "duplicate column '%s'", COL_NAMES[c]);
        seen[c] = 1;
        colmap[c] = i;
    }
    for (int k = 0; k < NCOLS; k++)
        if (!seen[k])
            return fail(r->err, r->name, line, "missing column '%s' (expected %s)", COL_NAMES[k],
                        HEADER_TEXT);
    return PRS_OK;
}

/* The model and gpu fields: valid names, the same on every row. */
static int check_names(reader *r, char **f, const int *colmap, int line)
{
    char ex[200];
    const int cols[2] = {C_MODEL, C_GPU};
    char *const dst[2] = {r->p->model, r->p->gpu};
    for (int k = 0; k < 2; k++) {
        const char *v = f[colmap[cols[k]]];
        if (!valid_name(v))
            return fail(r->err, r->name, line,
                        "column '%s': expected a name of 1 to %d letters, digits, '-', '_' or "
                        "'.', got '%s'",
                        COL_NAMES[cols[k]], PRS_INFER_NAME_MAX - 1,
                        prs__csv_excerpt(ex, sizeof ex, v));
        if (r->model_line == 0) {
            snprintf(dst[k], PRS_INFER_NAME_MAX, "%s", v);
        } else if (strcmp(dst[k], v) != 0) {
            return fail(r->err, r->name, line,
                        "column '%s': '%s' differs from '%s' on line %d (one %s per file)",
                        COL_NAMES[cols[k]], prs__csv_excerpt(ex, sizeof ex, v), dst[k],
                        r->model_line, COL_NAMES[cols[k]]);
        }
    }
    if (r->model_line == 0) r->model_line = line;
    return PRS_OK;
}

static int bad_field(reader *r, int line, int col, const char *want, const char *got)
{
    char ex[200];
    return fail(r->err, r->name, line, "column '%s': expected %s, got '%s'", COL_NAMES[col], want,
                prs__csv_excerpt(ex, sizeof ex, got));
}

/* The numeric fields of a row, each checked against its range for the row's phase. */
static int parse_numbers(reader *r, char **f, const int *colmap, int line, row *w)
{
    long v;
    int cap = w->phase == PRS__INFER_CAPACITY, idle = w->phase == PRS__INFER_IDLE;
    if (parse_long(f[colmap[C_TP]], 1, PRS_INFER_MAX_TP, &v) != 0)
        return bad_field(r, line, C_TP, "an integer in 1..64", f[colmap[C_TP]]);
    w->tp = (int)v;
    if (parse_long(f[colmap[C_FREQ]], cap ? 0 : 1, cap ? 0 : PRS_INFER_MAX_FREQ_MHZ, &v) != 0)
        return bad_field(r, line, C_FREQ,
                         cap ? "0 (a capacity row holds for every clock)"
                             : "an integer in 1..10000 (MHz)",
                         f[colmap[C_FREQ]]);
    w->freq_mhz = (int)v;
    if (parse_long(f[colmap[C_BATCH]], idle ? 0 : 1, idle ? 0 : PRS_INFER_MAX_BATCH, &v) != 0)
        return bad_field(r, line, C_BATCH, idle ? "0 on an idle row" : "an integer in 1..1000000",
                         f[colmap[C_BATCH]]);
    w->batch = (int)v;
    if (parse_long(f[colmap[C_TOKENS]], idle ? 0 : 1, idle ? 0 : PRS_INFER_MAX_TOKENS, &v) != 0)
        return bad_field(r, line, C_TOKENS,
                         idle ? "0 on an idle row" : "an integer in 1..1000000000",
                         f[colmap[C_TOKENS]]);
    w->tokens = v;
    const char *t = f[colmap[C_TIME]], *e = f[colmap[C_ENERGY]];
    if (prs_num_parse_double(t, &w->time_s) != 0 ||
        (cap ? w->time_s != 0 : !(w->time_s > 0 && w->time_s <= PRS_PROFILE_MAX_TIME_S)))
        return bad_field(r, line, C_TIME,
                         cap ? "0 on a capacity row" : "a number in (0, 1e6] (seconds)", t);
    if (prs_num_parse_double(e, &w->energy_j) != 0 ||
        (cap ? w->energy_j != 0 : !(w->energy_j >= 0 && w->energy_j <= PRS_PROFILE_MAX_ENERGY_J)))
        return bad_field(r, line, C_ENERGY,
                         cap ? "0 on a capacity row" : "a number in [0, 1e12] (joules)", e);
    return PRS_OK;
}

static int parse_row(reader *r, char **f, int nfields, int line, const int *colmap)
{
    if (nfields != NCOLS)
        return fail(r->err, r->name, line, "expected %d fields, got %d", NCOLS, nfields);
    int rc = check_names(r, f, colmap, line);
    if (rc != PRS_OK) return rc;
    row w = {.line = line, .phase = -1};
    for (int k = 0; k < 4; k++)
        if (strcmp(f[colmap[C_PHASE]], prs__infer_phase_name(k)) == 0) w.phase = k;
    if (w.phase < 0)
        return bad_field(r, line, C_PHASE, "prefill, decode, idle or capacity", f[colmap[C_PHASE]]);
    rc = parse_numbers(r, f, colmap, line, &w);
    if (rc != PRS_OK) return rc;
    if (r->nrows == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 256;
        row *nr = realloc(r->rows, ncap * sizeof *nr);
        if (!nr) return prs_error_set(r->err, PRS_ENOMEM, "%s: out of memory", r->name);
        r->rows = nr;
        r->cap = ncap;
    }
    r->rows[r->nrows++] = w;
    return PRS_OK;
}

/* Copy one line into the scratch buffer and hand its fields to the header or row parser. */
static int parse_line(reader *r, const char *text, size_t len, int line, int *have_header,
                      int *colmap)
{
    if (len > PRS_INFER_PROFILE_MAX_LINE)
        return fail(r->err, r->name, line, "line longer than %d bytes", PRS_INFER_PROFILE_MAX_LINE);
    if (memchr(text, '\0', len)) return fail(r->err, r->name, line, "embedded NUL byte");
    size_t k = 0;
    while (k < len && prs__csv_blank(text[k]))
        k++;
    if (k == len || text[k] == '#') return PRS_OK; /* blank line or comment */
    if (len >= r->bufcap) {
        char *b = realloc(r->buf, len + 1);
        if (!b) return prs_error_set(r->err, PRS_ENOMEM, "%s: out of memory", r->name);
        r->buf = b;
        r->bufcap = len + 1;
    }
    memcpy(r->buf, text, len);
    r->buf[len] = '\0';
    char *fields[MAX_FIELDS];
    int nfields = 0;
    const char *problem = prs__csv_split(r->buf, fields, MAX_FIELDS, &nfields);
    if (problem) return fail(r->err, r->name, line, "%s", problem);
    if (*have_header) return parse_row(r, fields, nfields, line, colmap);
    *have_header = 1;
    return parse_header(r, fields, nfields, line, colmap);
}

static int parse_text(reader *r, const char *text, size_t len)
{
    if (len > (size_t)PRS_INFER_PROFILE_MAX_BYTES)
        return fail(r->err, r->name, 0, "larger than %ld bytes (a profile's limit)",
                    (long)PRS_INFER_PROFILE_MAX_BYTES);
    size_t pos = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3; /* UTF-8 byte-order mark */
    int line = 0, have_header = 0, colmap[NCOLS] = {0};
    while (pos < len) {
        if (line == INT_MAX) return fail(r->err, r->name, 0, "too many lines");
        line++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        int rc = parse_line(r, text + pos, n, line, &have_header, colmap);
        if (rc != PRS_OK) return rc;
        pos += n + (nl ? 1 : 0);
    }
    if (!have_header)
        return fail(r->err, r->name, 0, "empty file (expected header %s)", HEADER_TEXT);
    if (r->nrows == 0) return fail(r->err, r->name, 0, "no data rows");
    return PRS_OK;
}

/* ---- entry points ---- */

int prs_infer_profile_parse(const char *text, size_t len, const char *name, prs_infer_profile **out,
                            prs_error *err)
{
    if (out) *out = NULL;
    if (!name) name = "<memory>";
    if (!out || (!text && len > 0))
        return prs_error_set(err, PRS_EINVAL, "prs_infer_profile_parse: NULL argument");
    reader r = {.name = name, .err = err};
    r.p = calloc(1, sizeof *r.p);
    if (!r.p) return prs_error_set(err, PRS_ENOMEM, "%s: out of memory", name);
    int rc = parse_text(&r, text ? text : "", len);
    if (rc == PRS_OK) rc = prs__infer_profile_build(name, r.rows, r.nrows, r.p, err);
    free(r.buf);
    free(r.rows);
    if (rc != PRS_OK) {
        prs_infer_profile_free(r.p);
        return rc;
    }
    *out = r.p;
    return PRS_OK;
}

int prs_infer_profile_load(const char *path, prs_infer_profile **out, prs_error *err)
{
    if (out) *out = NULL;
    if (!path || !out)
        return prs_error_set(err, PRS_EINVAL, "prs_infer_profile_load: NULL argument");
    char *text;
    size_t len;
    int rc = prs__read_bounded(path, (size_t)PRS_INFER_PROFILE_MAX_BYTES, "a profile's limit",
                               &text, &len, err);
    if (rc == PRS_OK) rc = prs_infer_profile_parse(text, len, path, out, err);
    free(text);
    return rc;
}
