/* Stage profiles (include/perseus/profile.h) as values: a growable array of rows plus a small
 * open-addressing hash set of (stage, instruction, clock) keys, so duplicate detection stays O(1)
 * per row; the checks every row passes, and the queries. Reading one from CSV is profile_csv.c's.
 *
 * Limits (perseus/limits.h): stage <= PRS_PROFILE_MAX_STAGE (so that num_stages and per-stage
 * arrays stay sane); time and energy at most PRS_PROFILE_MAX_TIME_S and PRS_PROFILE_MAX_ENERGY_J.
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
#include "profile_int.h"

struct prs_profile {
    char *name;
    prs_profile_row *rows;
    size_t nrows, cap;
    /* Hash set: slot holds row index + 1 (0 = empty); nslots is a power of two. */
    size_t *slots;
    size_t nslots;
    int max_stage; /* -1 when empty */
};

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

prs_profile *prs__profile_alloc(const char *name)
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
    return prs__profile_alloc(PRS__PROFILE_MEMORY_NAME);
}

void prs_profile_free(prs_profile *p)
{
    if (!p) return;
    free(p->name);
    free(p->rows);
    free(p->slots);
    free(p);
}

int prs__profile_fail(prs_error *err, int code, const char *name, int line, const char *fmt, ...)
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

int prs__profile_append(prs_profile *p, const prs_profile_row *row, prs_error *err)
{
    const prs_profile_row *old = find_row(p, row);
    if (old) {
        if (old->line > 0)
            return prs__profile_fail(err, PRS_EPARSE, p->name, row->line,
                                     "duplicate row for stage %d %s at %d MHz (first on line %d)",
                                     row->stage, prs_instr_name(row->instr), row->freq_mhz,
                                     old->line);
        return prs__profile_fail(err, PRS_EPARSE, p->name, row->line,
                                 "duplicate row for stage %d %s at %d MHz (same as row %zu)",
                                 row->stage, prs_instr_name(row->instr), row->freq_mhz,
                                 (size_t)(old - p->rows) + 1);
    }
    if (reserve_one(p) != PRS_OK)
        return prs__profile_fail(err, PRS_ENOMEM, p->name, 0, "out of memory");
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
        return prs__profile_fail(err, PRS_EPARSE, p->name, row->line, "stage %d out of range 0..%d",
                                 row->stage, PRS_PROFILE_MAX_STAGE);
    if (row->instr != PRS_FORWARD && row->instr != PRS_BACKWARD)
        return prs__profile_fail(err, PRS_EPARSE, p->name, row->line,
                                 "instruction %d is neither forward nor backward", (int)row->instr);
    if (row->freq_mhz <= 0)
        return prs__profile_fail(err, PRS_EPARSE, p->name, row->line,
                                 "frequency must be > 0 MHz, got %d", row->freq_mhz);
    if (!(row->time_s > 0 && row->time_s <= PRS_PROFILE_MAX_TIME_S))
        return prs__profile_fail(err, PRS_EPARSE, p->name, row->line,
                                 "time must be a number in (0, %g] s, got %g",
                                 PRS_PROFILE_MAX_TIME_S, row->time_s);
    if (!(row->energy_j > 0 && row->energy_j <= PRS_PROFILE_MAX_ENERGY_J))
        return prs__profile_fail(err, PRS_EPARSE, p->name, row->line,
                                 "energy must be a number in (0, %g] J, got %g",
                                 PRS_PROFILE_MAX_ENERGY_J, row->energy_j);
    return prs__profile_append(p, row, err);
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
    return p ? p->name : PRS__PROFILE_MEMORY_NAME;
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
    if (!codes) return prs__profile_fail(err, PRS_ENOMEM, p->name, 0, "out of memory");
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
    return prs__profile_fail(err, PRS_EPARSE, p->name, 0, "stage %d has no %s rows",
                             (int)(want / 2), prs_instr_name((prs_instr)(want % 2)));
}
