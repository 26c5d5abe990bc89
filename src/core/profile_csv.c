/* Stage profiles from CSV (include/perseus/profile.h: prs_profile_parse, prs_profile_load).
 *
 * The reader works on a bounded buffer (text need not be NUL-terminated and may hold anything):
 * it walks it line by line, copies each line into a scratch buffer and splits it as every CSV of
 * the project is split (src/base/csvfield.c: commas, blanks trimmed, a field may be wrapped in
 * double quotes as long as it holds no quote itself and no line break; anything else with a
 * quote in it is rejected with a message, never misread). Every error is one line,
 * "NAME:LINE: problem" ("NAME: problem" for the file as a whole), and echoes at most a short,
 * escaped excerpt of the offending field. A header with rank, dp_rank, pp_rank and tp_rank as
 * well is a rank-level profile (Zeus's): its rows are combined per stage (profile_ranks.c).
 *
 * Rows whose instruction is "load" must have five fields but are otherwise not looked at: the
 * reference ignores them, and we do not know every profiler's conventions for them.
 *
 * Lines are at most PRS_PROFILE_MAX_LINE bytes; files at most PRS_PROFILE_MAX_BYTES, read no
 * further. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "csvfield.h"
#include "perseus/limits.h"
#include "perseus/numfmt.h"
#include "perseus/profile.h"
#include "profile_int.h"
#include "profile_ranks.h"
#include "readfile.h"

#define NCOLS 5       /* a stage profile's columns */
#define NCOLS_RANKS 9 /* a rank-level profile's: the five and rank, dp_rank, pp_rank, tp_rank */
#define MAX_FIELDS 12 /* fields kept per line; more are only counted */

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
            return prs__profile_fail(
                r->err, PRS_EPARSE, r->name, line,
                "unknown column '%s' (expected stage,instruction,frequency,time,energy, "
                "with rank,dp_rank,pp_rank,tp_rank in a rank-level profile)",
                prs__csv_excerpt(ex, sizeof ex, fields[i]));
        if (seen[c])
            return prs__profile_fail(r->err, PRS_EPARSE, r->name, line, "duplicate column '%s'",
                                     COL_NAMES[c]);
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
            return prs__profile_fail(r->err, PRS_EPARSE, r->name, line,
                                     k < NCOLS
                                         ? "missing column '%s'"
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
            return prs__profile_fail(r->err, PRS_EPARSE, r->name, line,
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
        if (!v) return prs__profile_fail(r->err, PRS_ENOMEM, r->name, 0, "out of memory");
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
        return prs__profile_fail(r->err, PRS_EPARSE, r->name, line, "expected %d fields, got %d",
                                 r->ncols, nfields);
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
        return prs__profile_fail(
            r->err, PRS_EPARSE, r->name, line,
            "column 'instruction': expected forward, backward or load, got '%s'",
            prs__csv_excerpt(ex, sizeof ex, instr));

    const char *s = fields[colmap[COL_STAGE]];
    if (prs_num_parse_int(s, &row.stage) != 0 || row.stage < 0 || row.stage > PRS_PROFILE_MAX_STAGE)
        return prs__profile_fail(r->err, PRS_EPARSE, r->name, line,
                                 "column 'stage': expected an integer in 0..%d, got '%s'",
                                 PRS_PROFILE_MAX_STAGE, prs__csv_excerpt(ex, sizeof ex, s));
    s = fields[colmap[COL_FREQ]];
    if (prs_num_parse_int(s, &row.freq_mhz) != 0 || row.freq_mhz <= 0)
        return prs__profile_fail(r->err, PRS_EPARSE, r->name, line,
                                 "column 'frequency': expected an integer > 0 (MHz), got '%s'",
                                 prs__csv_excerpt(ex, sizeof ex, s));
    s = fields[colmap[COL_TIME]];
    if (prs_num_parse_double(s, &row.time_s) != 0 || !(row.time_s > 0))
        return prs__profile_fail(r->err, PRS_EPARSE, r->name, line,
                                 "column 'time': expected a number > 0, got '%s'",
                                 prs__csv_excerpt(ex, sizeof ex, s));
    if (row.time_s > PRS_PROFILE_MAX_TIME_S)
        return prs__profile_fail(
            r->err, PRS_EPARSE, r->name, line,
            "column 'time': %s s is more than one computation may take (at most %g s)",
            prs__csv_excerpt(ex, sizeof ex, s), PRS_PROFILE_MAX_TIME_S);
    s = fields[colmap[COL_ENERGY]];
    if (prs_num_parse_double(s, &row.energy_j) != 0 || !(row.energy_j > 0))
        return prs__profile_fail(r->err, PRS_EPARSE, r->name, line,
                                 "column 'energy': expected a number > 0, got '%s'",
                                 prs__csv_excerpt(ex, sizeof ex, s));
    if (row.energy_j > PRS_PROFILE_MAX_ENERGY_J)
        return prs__profile_fail(
            r->err, PRS_EPARSE, r->name, line,
            "column 'energy': %s J is more than one computation may take (at most %g J)",
            prs__csv_excerpt(ex, sizeof ex, s), PRS_PROFILE_MAX_ENERGY_J);
    if (r->ncols == NCOLS_RANKS) return keep_ranked(r, fields, line, colmap, &row);
    return prs__profile_append(r->p, &row, r->err);
}

static int parse_text(reader *r, const char *text, size_t len)
{
    size_t pos = 0;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) pos = 3; /* UTF-8 byte-order mark */
    int line = 0, have_header = 0;
    int colmap[NCOLS_RANKS] = {0};
    while (pos < len) {
        if (line == INT_MAX)
            return prs__profile_fail(r->err, PRS_EPARSE, r->name, 0, "too many lines");
        line++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t linelen = nl ? (size_t)(nl - (text + pos)) : len - pos;
        const char *ltext = text + pos;
        pos += linelen + (nl ? 1 : 0);
        if (linelen > PRS_PROFILE_MAX_LINE)
            return prs__profile_fail(r->err, PRS_EPARSE, r->name, line, "line longer than %d bytes",
                                     PRS_PROFILE_MAX_LINE);
        if (memchr(ltext, '\0', linelen))
            return prs__profile_fail(r->err, PRS_EPARSE, r->name, line, "embedded NUL byte");
        size_t k = 0;
        while (k < linelen && prs__csv_blank(ltext[k]))
            k++;
        if (k == linelen) continue; /* blank line */
        if (linelen >= r->bufcap) {
            char *b = realloc(r->buf, linelen + 1);
            if (!b) return prs__profile_fail(r->err, PRS_ENOMEM, r->name, 0, "out of memory");
            r->buf = b;
            r->bufcap = linelen + 1;
        }
        memcpy(r->buf, ltext, linelen);
        r->buf[linelen] = '\0';
        char *fields[MAX_FIELDS];
        int nfields = 0;
        const char *problem = prs__csv_split(r->buf, fields, MAX_FIELDS, &nfields);
        if (problem) return prs__profile_fail(r->err, PRS_EPARSE, r->name, line, "%s", problem);
        int rc = have_header ? parse_row(r, fields, nfields, line, colmap)
                             : parse_header(r, fields, nfields, line, colmap);
        if (rc != PRS_OK) return rc;
        have_header = 1;
    }
    if (!have_header)
        return prs__profile_fail(
            r->err, PRS_EPARSE, r->name, 0,
            "empty file (expected header stage,instruction,frequency,time,energy)");
    if (r->nranked > 0) {
        int rc = prs__profile_combine_ranks(r->p, r->name, r->ranked, r->nranked, r->err);
        if (rc != PRS_OK) return rc;
    }
    if (prs_profile_nrows(r->p) == 0)
        return prs__profile_fail(r->err, PRS_EPARSE, r->name, 0,
                                 "no forward or backward data rows");
    return PRS_OK;
}

int prs_profile_parse(const char *name, const char *text, size_t len, prs_profile **out,
                      prs_error *err)
{
    if (out) *out = NULL;
    if (!name) name = PRS__PROFILE_MEMORY_NAME;
    if (!out || (!text && len > 0))
        return prs_error_set(err, PRS_EINVAL, "prs_profile_parse: NULL argument");
    reader r = {.name = name, .err = err};
    r.p = prs__profile_alloc(name);
    if (!r.p) return prs__profile_fail(err, PRS_ENOMEM, name, 0, "out of memory");
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
