/* Stage profiles (include/perseus/profile.h): a growable array of rows plus a small open-addressing
 * hash set of (stage, instruction, clock) keys, so duplicate detection stays O(1) per row.
 *
 * The CSV reader works on a bounded buffer (text need not be NUL-terminated and may hold anything):
 * it walks it line by line, copies each line into a scratch buffer, splits it on commas and trims
 * blanks around each field. Quoting: a field may be wrapped in double quotes as long as it holds no
 * quote itself (no "" escapes) and no line break; anything else with a quote in it is rejected with
 * a message, never misread. Every error is one line, "NAME:LINE: problem" ("NAME: problem" for the
 * file as a whole), and echoes at most a short, escaped excerpt of the offending field.
 *
 * Rows whose instruction is "load" must have five fields but are otherwise not looked at: the
 * reference ignores them, and we do not know every profiler's conventions for them.
 *
 * Limits (perseus/limits.h): stage <= PRS_PROFILE_MAX_STAGE (so that num_stages and per-stage
 * arrays stay sane); time and energy at most PRS_PROFILE_MAX_TIME_S and PRS_PROFILE_MAX_ENERGY_J;
 * lines at most PRS_PROFILE_MAX_LINE bytes; files at most PRS_PROFILE_MAX_BYTES, read no further.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/limits.h"
#include "perseus/profile.h"
#include "perseus/numfmt.h"
#include "csvfield.h"
#include "readfile.h"
#include "profile_ranks.h"

#define NCOLS 5       /* a stage profile's columns */
#define NCOLS_RANKS 9 /* a rank-level profile's: the five and rank, dp_rank, pp_rank, tp_rank */
#define MAX_FIELDS 12 /* fields kept per line; more are only counted */

struct prs_profile {
    char *name;
    prs_profile_row *rows;
    size_t nrows, cap;
    /* Hash set: slot holds row index + 1 (0 = empty); nslots is a power of two. */
    size_t *slots;
    size_t nslots;
    int max_stage; /* -1 when empty */
};

static const char MEMORY_NAME[] = "<memory>";

const char *prs_instr_name(prs_instr instr)
{
    switch (instr) {
    case PRS_FORWARD:
        return "forward";
    case PRS_BACKWARD:
        return "backward";
    default:
        return "?";
    }
}

static prs_profile *profile_alloc(const char *name)
{
    prs_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    size_t len = strlen(name);
    p->name = malloc(len + 1);
    if (!p->name) {
        free(p);
        return NULL;
    }
    memcpy(p->name, name, len + 1);
    p->max_stage = -1;
    return p;
}

prs_profile *prs_profile_new(void)
{
    return profile_alloc(MEMORY_NAME);
}

void prs_profile_free(prs_profile *p)
{
    if (!p) return;
    free(p->name);
    free(p->rows);
    free(p->slots);
    free(p);
}

/* "NAME:LINE: problem", or "NAME: problem" when line is 0. */
static int fail(prs_error *err, int code, const char *name, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(prs_error *err, int code, const char *name, int line, const char *fmt, ...)
{
    if (!err) return code;
    char problem[PRS_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    if (line > 0) return prs_error_set(err, code, "%s:%d: %s", name, line, problem);
    return prs_error_set(err, code, "%s: %s", name, problem);
}

/* ---- duplicate detection ---- */

static uint64_t key_hash(int stage, prs_instr instr, int freq_mhz)
{
    uint64_t h = ((uint64_t)(uint32_t)stage << 33) ^ ((uint64_t)(instr & 1) << 32) ^
                 (uint64_t)(uint32_t)freq_mhz;
    /* splitmix64 finaliser */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

static int same_key(const prs_profile_row *a, const prs_profile_row *b)
{
    return a->stage == b->stage && a->instr == b->instr && a->freq_mhz == b->freq_mhz;
}

/* The row with row's key, or NULL. */
static const prs_profile_row *find_row(const prs_profile *p, const prs_profile_row *row)
{
    if (p->nslots == 0 || !p->rows) return NULL;
    size_t mask = p->nslots - 1;
    size_t i = (size_t)key_hash(row->stage, row->instr, row->freq_mhz) & mask;
    while (p->slots[i] != 0) {
        const prs_profile_row *cand = &p->rows[p->slots[i] - 1];
        if (same_key(cand, row)) return cand;
        i = (i + 1) & mask;
    }
    return NULL;
}

static void slot_insert(size_t *slots, size_t nslots, const prs_profile_row *row, size_t idx)
{
    size_t mask = nslots - 1;
    size_t i = (size_t)key_hash(row->stage, row->instr, row->freq_mhz) & mask;
    while (slots[i] != 0)
        i = (i + 1) & mask;
    slots[i] = idx + 1;
}

/* Room for one more row in rows[] and in the hash set (kept at most half full). */
static int reserve_one(prs_profile *p)
{
    if (p->nrows == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *p->rows) return PRS_ENOMEM;
        prs_profile_row *rows = realloc(p->rows, cap * sizeof *rows);
        if (!rows) return PRS_ENOMEM;
        p->rows = rows;
        p->cap = cap;
    }
    if ((p->nrows + 1) * 2 > p->nslots) {
        size_t nslots = p->nslots ? p->nslots * 2 : 128;
        if (nslots > SIZE_MAX / sizeof *p->slots) return PRS_ENOMEM;
        size_t *slots = calloc(nslots, sizeof *slots);
        if (!slots) return PRS_ENOMEM;
        for (size_t k = 0; k < p->nrows; k++)
            slot_insert(slots, nslots, &p->rows[k], k);
        free(p->slots);
        p->slots = slots;
        p->nslots = nslots;
    }
    return PRS_OK;
}

/* Appends a row whose values are already valid; checks only for a duplicate key. */
static int append_row(prs_profile *p, const prs_profile_row *row, prs_error *err)
{
    const prs_profile_row *old = find_row(p, row);
    if (old) {
        if (old->line > 0)
            return fail(err, PRS_EPARSE, p->name, row->line,
                        "duplicate row for stage %d %s at %d MHz (first on line %d)", row->stage,
                        prs_instr_name(row->instr), row->freq_mhz, old->line);
        return fail(err, PRS_EPARSE, p->name, row->line,
                    "duplicate row for stage %d %s at %d MHz (same as row %zu)", row->stage,
                    prs_instr_name(row->instr), row->freq_mhz, (size_t)(old - p->rows) + 1);
    }
    if (reserve_one(p) != PRS_OK) return fail(err, PRS_ENOMEM, p->name, 0, "out of memory");
    p->rows[p->nrows] = *row;
    slot_insert(p->slots, p->nslots, row, p->nrows);
    p->nrows++;
    if (row->stage > p->max_stage) p->max_stage = row->stage;
    return PRS_OK;
}

int prs_profile_add(prs_profile *p, const prs_profile_row *row, prs_error *err)
{
    if (!p || !row) return prs_error_set(err, PRS_EINVAL, "prs_profile_add: NULL argument");
    if (row->stage < 0 || row->stage > PRS_PROFILE_MAX_STAGE)
        return fail(err, PRS_EPARSE, p->name, row->line, "stage %d out of range 0..%d", row->stage,
                    PRS_PROFILE_MAX_STAGE);
    if (row->instr != PRS_FORWARD && row->instr != PRS_BACKWARD)
        return fail(err, PRS_EPARSE, p->name, row->line,
                    "instruction %d is neither forward nor backward", (int)row->instr);
    if (row->freq_mhz <= 0)
        return fail(err, PRS_EPARSE, p->name, row->line, "frequency must be > 0 MHz, got %d",
                    row->freq_mhz);
    if (!(row->time_s > 0 && row->time_s <= PRS_PROFILE_MAX_TIME_S))
        return fail(err, PRS_EPARSE, p->name, row->line,
                    "time must be a number in (0, %g] s, got %g", PRS_PROFILE_MAX_TIME_S,
                    row->time_s);
    if (!(row->energy_j > 0 && row->energy_j <= PRS_PROFILE_MAX_ENERGY_J))
        return fail(err, PRS_EPARSE, p->name, row->line,
                    "energy must be a number in (0, %g] J, got %g", PRS_PROFILE_MAX_ENERGY_J,
                    row->energy_j);
    return append_row(p, row, err);
}

/* ---- CSV reading ---- */

enum col {
    COL_STAGE,
    COL_INSTR,
    COL_FREQ,
    COL_TIME,
    COL_ENERGY,
    COL_RANK,
    COL_DP_RANK,
    COL_PP_RANK,
    COL_TP_RANK
};
static const char *const COL_NAMES[NCOLS_RANKS] = {
    "stage", "instruction", "frequency", "time", "energy", "rank", "dp_rank", "pp_rank", "tp_rank"};

typedef struct reader {
    const char *name;
    prs_profile *p;
    prs_error *err;
    char *buf; /* scratch copy of the current line */
    size_t bufcap;
    int ncols;             /* NCOLS, or NCOLS_RANKS for a rank-level profile */
    prs__rank_row *ranked; /* a rank-level profile's rows, combined at the end */
    size_t nranked, rankcap;
} reader;

static int parse_header(reader *r, char **fields, int nfields, int line, int *colmap)
{
    char ex[200];
    int seen[NCOLS_RANKS] = {0};
    int nstored = nfields < MAX_FIELDS ? nfields : MAX_FIELDS;
    for (int i = 0; i < nstored; i++) {
        int c = -1;
        for (int k = 0; k < NCOLS_RANKS; k++)
            if (strcmp(fields[i], COL_NAMES[k]) == 0) c = k;
        if (c < 0)
            return fail(r->err, PRS_EPARSE, r->name, line,
                        "unknown column '%s' (expected stage,instruction,frequency,time,energy, "
                        "with rank,dp_rank,pp_rank,tp_rank in a rank-level profile)",
                        prs__csv_excerpt(ex, sizeof ex, fields[i]));
        if (seen[c])
            return fail(r->err, PRS_EPARSE, r->name, line, "duplicate column '%s'", COL_NAMES[c]);
        seen[c] = 1;
        colmap[c] = i;
    }
    /* Every field is a distinct known name (more than NCOLS_RANKS fields would have repeated
     * one), so any name not seen is missing. The rank columns come all or none. */
    int nrank = 0;
    for (int k = NCOLS; k < NCOLS_RANKS; k++)
        nrank += seen[k];
    r->ncols = nrank ? NCOLS_RANKS : NCOLS;
    for (int k = 0; k < r->ncols; k++)
        if (!seen[k])
            return fail(r->err, PRS_EPARSE, r->name, line,
                        k < NCOLS ? "missing column '%s'"
                                  : "missing column '%s' (a rank-level profile names rank, "
                                    "dp_rank, pp_rank and tp_rank)",
                        COL_NAMES[k]);
    return PRS_OK;
}

/* A rank-level row's four rank columns into row. */
static int parse_rank_fields(reader *r, char **fields, int line, const int *colmap,
                             prs__rank_row *row)
{
    char ex[200];
    int *dst[4] = {&row->rank, &row->dp_rank, &row->pp_rank, &row->tp_rank};
    for (int k = 0; k < 4; k++) {
        const char *s = fields[colmap[COL_RANK + k]];
        if (prs_num_parse_int(s, dst[k]) != 0 || *dst[k] < 0 || *dst[k] > PRS_PROFILE_MAX_RANK)
            return fail(r->err, PRS_EPARSE, r->name, line,
                        "column '%s': expected an integer in 0..%d, got '%s'",
                        COL_NAMES[COL_RANK + k], PRS_PROFILE_MAX_RANK,
                        prs__csv_excerpt(ex, sizeof ex, s));
    }
    return PRS_OK;
}

/* Keep a rank-level row for combining at the end. */
static int keep_ranked(reader *r, char **fields, int line, const int *colmap,
                       const prs_profile_row *row)
{
    prs__rank_row rr = {.stage = row->stage,
                        .instr = row->instr,
                        .freq_mhz = row->freq_mhz,
                        .time_s = row->time_s,
                        .energy_j = row->energy_j,
                        .line = line};
    int rc = parse_rank_fields(r, fields, line, colmap, &rr);
    if (rc != PRS_OK) return rc;
    if (r->nranked == r->rankcap) {
        size_t cap = r->rankcap ? r->rankcap * 2 : 256;
        prs__rank_row *v = realloc(r->ranked, cap * sizeof *v);
        if (!v) return fail(r->err, PRS_ENOMEM, r->name, 0, "out of memory");
        r->ranked = v;
        r->rankcap = cap;
    }
    r->ranked[r->nranked++] = rr;
    return PRS_OK;
}

static int parse_row(reader *r, char **fields, int nfields, int line, const int *colmap)
{
    char ex[200];
    if (nfields != r->ncols)
        return fail(r->err, PRS_EPARSE, r->name, line, "expected %d fields, got %d", r->ncols,
                    nfields);
    const char *instr = fields[colmap[COL_INSTR]];
    prs_profile_row row = {0};
    row.line = line;
    if (strcmp(instr, "forward") == 0)
        row.instr = PRS_FORWARD;
    else if (strcmp(instr, "backward") == 0)
        row.instr = PRS_BACKWARD;
    else if (strcmp(instr, "load") == 0)
        return PRS_OK;
    else
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'instruction': expected forward, backward or load, got '%s'",
                    prs__csv_excerpt(ex, sizeof ex, instr));

    const char *s = fields[colmap[COL_STAGE]];
    if (prs_num_parse_int(s, &row.stage) != 0 || row.stage < 0 || row.stage > PRS_PROFILE_MAX_STAGE)
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'stage': expected an integer in 0..%d, got '%s'", PRS_PROFILE_MAX_STAGE,
                    prs__csv_excerpt(ex, sizeof ex, s));
    s = fields[colmap[COL_FREQ]];
    if (prs_num_parse_int(s, &row.freq_mhz) != 0 || row.freq_mhz <= 0)
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'frequency': expected an integer > 0 (MHz), got '%s'",
                    prs__csv_excerpt(ex, sizeof ex, s));
    s = fields[colmap[COL_TIME]];
    if (prs_num_parse_double(s, &row.time_s) != 0 || !(row.time_s > 0))
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'time': expected a number > 0, got '%s'",
                    prs__csv_excerpt(ex, sizeof ex, s));
    if (row.time_s > PRS_PROFILE_MAX_TIME_S)
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'time': %s s is more than one computation may take (at most %g s)",
                    prs__csv_excerpt(ex, sizeof ex, s), PRS_PROFILE_MAX_TIME_S);
    s = fields[colmap[COL_ENERGY]];
    if (prs_num_parse_double(s, &row.energy_j) != 0 || !(row.energy_j > 0))
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'energy': expected a number > 0, got '%s'",
                    prs__csv_excerpt(ex, sizeof ex, s));
    if (row.energy_j > PRS_PROFILE_MAX_ENERGY_J)
        return fail(r->err, PRS_EPARSE, r->name, line,
                    "column 'energy': %s J is more than one computation may take (at most %g J)",
                    prs__csv_excerpt(ex, sizeof ex, s), PRS_PROFILE_MAX_ENERGY_J);
    if (r->ncols == NCOLS_RANKS) return keep_ranked(r, fields, line, colmap, &row);
    return append_row(r->p, &row, r->err);
}

static int parse_text(reader *r, const char *text, size_t len)
{
    size_t pos = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3; /* UTF-8 byte-order mark */
    int line = 0, have_header = 0;
    int colmap[NCOLS_RANKS] = {0};
    while (pos < len) {
        if (line == INT_MAX) return fail(r->err, PRS_EPARSE, r->name, 0, "too many lines");
        line++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t linelen = nl ? (size_t)(nl - (text + pos)) : len - pos;
        const char *ltext = text + pos;
        pos += linelen + (nl ? 1 : 0);
        if (linelen > PRS_PROFILE_MAX_LINE)
            return fail(r->err, PRS_EPARSE, r->name, line, "line longer than %d bytes",
                        PRS_PROFILE_MAX_LINE);
        if (memchr(ltext, '\0', linelen))
            return fail(r->err, PRS_EPARSE, r->name, line, "embedded NUL byte");
        size_t k = 0;
        while (k < linelen && prs__csv_blank(ltext[k]))
            k++;
        if (k == linelen) continue; /* blank line */
        if (linelen >= r->bufcap) {
            char *b = realloc(r->buf, linelen + 1);
            if (!b) return fail(r->err, PRS_ENOMEM, r->name, 0, "out of memory");
            r->buf = b;
            r->bufcap = linelen + 1;
        }
        memcpy(r->buf, ltext, linelen);
        r->buf[linelen] = '\0';
        char *fields[MAX_FIELDS];
        int nfields = 0;
        const char *problem = prs__csv_split(r->buf, fields, MAX_FIELDS, &nfields);
        if (problem) return fail(r->err, PRS_EPARSE, r->name, line, "%s", problem);
        int rc = have_header ? parse_row(r, fields, nfields, line, colmap)
                             : parse_header(r, fields, nfields, line, colmap);
        if (rc != PRS_OK) return rc;
        have_header = 1;
    }
    if (!have_header)
        return fail(r->err, PRS_EPARSE, r->name, 0,
                    "empty file (expected header stage,instruction,frequency,time,energy)");
    if (r->nranked > 0) {
        int rc = prs__profile_combine_ranks(r->p, r->name, r->ranked, r->nranked, r->err);
        if (rc != PRS_OK) return rc;
    }
    if (r->p->nrows == 0)
        return fail(r->err, PRS_EPARSE, r->name, 0, "no forward or backward data rows");
    return PRS_OK;
}

int prs_profile_parse(const char *name, const char *text, size_t len, prs_profile **out,
                      prs_error *err)
{
    if (out) *out = NULL;
    if (!name) name = MEMORY_NAME;
    if (!out || (!text && len > 0))
        return prs_error_set(err, PRS_EINVAL, "prs_profile_parse: NULL argument");
    reader r = {.name = name, .err = err};
    r.p = profile_alloc(name);
    if (!r.p) return fail(err, PRS_ENOMEM, name, 0, "out of memory");
    int rc = parse_text(&r, text ? text : "", len);
    free(r.buf);
    free(r.ranked);
    if (rc != PRS_OK) {
        prs_profile_free(r.p);
        return rc;
    }
    *out = r.p;
    return PRS_OK;
}

int prs_profile_load(const char *path, prs_profile **out, prs_error *err)
{
    if (out) *out = NULL;
    if (!path || !out) return prs_error_set(err, PRS_EINVAL, "prs_profile_load: NULL argument");
    char *text;
    size_t len;
    int rc = prs__read_bounded(path, (size_t)PRS_PROFILE_MAX_BYTES, "a profile's limit", &text,
                               &len, err);
    if (rc == PRS_OK) rc = prs_profile_parse(path, text, len, out, err);
    free(text);
    return rc;
}

/* ---- output and queries ---- */

int prs_profile_write_csv(const prs_profile *p, FILE *f)
{
    if (!p || !f) return PRS_EINVAL;
    if (fputs("stage,instruction,frequency,time,energy\n", f) == EOF) return PRS_EIO;
    for (size_t i = 0; i < p->nrows; i++) {
        const prs_profile_row *row = &p->rows[i];
        char t[PRS_NUMFMT_MAX], e[PRS_NUMFMT_MAX];
        if (fprintf(f, "%d,%s,%d,%s,%s\n", row->stage, prs_instr_name(row->instr), row->freq_mhz,
                    prs_num_fmt_double(t, sizeof t, row->time_s),
                    prs_num_fmt_double(e, sizeof e, row->energy_j)) < 0)
            return PRS_EIO;
    }
    return ferror(f) ? PRS_EIO : PRS_OK;
}

size_t prs_profile_nrows(const prs_profile *p)
{
    return p ? p->nrows : 0;
}

const prs_profile_row *prs_profile_rows(const prs_profile *p)
{
    return p ? p->rows : NULL;
}

int prs_profile_num_stages(const prs_profile *p)
{
    return p ? p->max_stage + 1 : 0;
}

const char *prs_profile_name(const prs_profile *p)
{
    return p ? p->name : MEMORY_NAME;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int prs_profile_check_stages(const prs_profile *p, int stages, prs_error *err)
{
    if (!p || stages < 0)
        return prs_error_set(err, PRS_EINVAL, "prs_profile_check_stages: bad argument");
    /* Codes 2*stage+instr of the rows below `stages`, sorted and deduplicated; the first gap in
     * 0, 1, 2, ... is the first missing (stage, instruction). O(n log n), independent of stages. */
    int *codes = malloc((p->nrows ? p->nrows : 1) * sizeof *codes);
    if (!codes) return fail(err, PRS_ENOMEM, p->name, 0, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < p->nrows; i++)
        if (p->rows[i].stage < stages) codes[n++] = 2 * p->rows[i].stage + (int)p->rows[i].instr;
    qsort(codes, n, sizeof *codes, cmp_int);
    long long need = 2LL * stages, want = 0; /* want: next code expected */
    for (size_t i = 0; i < n && want < need; i++) {
        if (codes[i] < want) continue; /* duplicate code */
        if (codes[i] > want) break;
        want++;
    }
    free(codes);
    if (want >= need) return PRS_OK;
    return fail(err, PRS_EPARSE, p->name, 0, "stage %d has no %s rows", (int)(want / 2),
                prs_instr_name((prs_instr)(want % 2)));
}
