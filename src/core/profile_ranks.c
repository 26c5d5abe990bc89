/* Rank-level profiles: Zeus master's profiler writes one row per GPU rank
 * (rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy) where the planner wants
 * one row per pipeline stage. A stage's computation is done when its slowest rank is done and
 * costs what all of its ranks burn together, so, as Zeus does when it hands a pipeline-only
 * scheduler the results of a 3D-parallel job, a group of rows with the same (stage, instruction,
 * clock) becomes one row with the longest time and the summed energy.
 *
 * Combining hides mistakes a per-stage file cannot make, so the input is checked first and every
 * inconsistency is an error naming a line: a rank whose coordinates change, two ranks at the same
 * coordinates, a stage spread over two pipeline positions, a rank listed twice for one group, and a
 * stage whose ranks did not all measure the same clocks (a max or a sum over a partial group would
 * be silently wrong). Everything is done by sorting copies: O(n log n) for n rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_ranks.h"

/* "NAME:LINE: problem" as PRS_EPARSE. */
#define FAIL(err, name, line, fmt, ...)                                                            \
    prs_error_set((err), PRS_EPARSE, "%s:%d: " fmt, (name), (line), __VA_ARGS__)

static int cmp3(int a, int b)
{
    return (a > b) - (a < b);
}

static int by_rank_line(const void *x, const void *y)
{
    const prs__rank_row *a = x, *b = y;
    int c = cmp3(a->rank, b->rank);
    return c ? c : cmp3(a->line, b->line);
}

static int by_coords_line(const void *x, const void *y)
{
    const prs__rank_row *a = x, *b = y;
    int c = cmp3(a->dp_rank, b->dp_rank);
    if (!c) c = cmp3(a->pp_rank, b->pp_rank);
    if (!c) c = cmp3(a->tp_rank, b->tp_rank);
    return c ? c : cmp3(a->line, b->line);
}

static int by_stage_line(const void *x, const void *y)
{
    const prs__rank_row *a = x, *b = y;
    int c = cmp3(a->stage, b->stage);
    return c ? c : cmp3(a->line, b->line);
}

static int same_group(const prs__rank_row *a, const prs__rank_row *b)
{
    return a->stage == b->stage && a->instr == b->instr && a->freq_mhz == b->freq_mhz;
}

static int by_group_rank_line(const void *x, const void *y)
{
    const prs__rank_row *a = x, *b = y;
    int c = cmp3(a->stage, b->stage);
    if (!c) c = cmp3((int)a->instr, (int)b->instr);
    if (!c) c = cmp3(a->freq_mhz, b->freq_mhz);
    if (!c) c = cmp3(a->rank, b->rank);
    return c ? c : cmp3(a->line, b->line);
}

static int same_coords(const prs__rank_row *a, const prs__rank_row *b)
{
    return a->dp_rank == b->dp_rank && a->pp_rank == b->pp_rank && a->tp_rank == b->tp_rank;
}

/* Each rank keeps its coordinates, and no two ranks share them. rows: any order, reordered. */
static int check_identities(const char *name, prs__rank_row *rows, size_t n, prs_error *err)
{
    qsort(rows, n, sizeof *rows, by_rank_line);
    size_t first = 0, nranks = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && rows[i].rank == rows[first].rank) {
            if (!same_coords(&rows[i], &rows[first]))
                return FAIL(
                    err, name, rows[i].line,
                    "rank %d is dp %d, pp %d, tp %d here but dp %d, pp %d, tp %d on line %d",
                    rows[i].rank, rows[i].dp_rank, rows[i].pp_rank, rows[i].tp_rank,
                    rows[first].dp_rank, rows[first].pp_rank, rows[first].tp_rank,
                    rows[first].line);
            continue;
        }
        first = i;
        rows[nranks++] = rows[i]; /* safe: nranks <= i; the duplicates are checked above */
    }
    /* rows[0..nranks) now holds one row per rank; the rest of rows[] was overwritten, so the
     * caller re-reads the input. Here only the coordinates matter. */
    qsort(rows, nranks, sizeof *rows, by_coords_line);
    for (size_t i = 1; i < nranks; i++)
        if (same_coords(&rows[i], &rows[i - 1]))
            return FAIL(err, name, rows[i].line,
                        "ranks %d (line %d) and %d both claim dp %d, pp %d, tp %d",
                        rows[i - 1].rank, rows[i - 1].line, rows[i].rank, rows[i].dp_rank,
                        rows[i].pp_rank, rows[i].tp_rank);
    return PRS_OK;
}

/* Every row of a stage comes from one pipeline position. */
static int check_stages(const char *name, prs__rank_row *rows, size_t n, prs_error *err)
{
    qsort(rows, n, sizeof *rows, by_stage_line);
    size_t first = 0;
    for (size_t i = 1; i < n; i++) {
        if (rows[i].stage != rows[first].stage) {
            first = i;
            continue;
        }
        if (rows[i].pp_rank != rows[first].pp_rank)
            return FAIL(err, name, rows[i].line,
                        "stage %d comes from rank %d at pp %d here but from rank %d at pp %d on "
                        "line %d (a stage runs on one pipeline position)",
                        rows[i].stage, rows[i].rank, rows[i].pp_rank, rows[first].rank,
                        rows[first].pp_rank, rows[first].line);
    }
    return PRS_OK;
}

static int cmp_int(const void *x, const void *y)
{
    return cmp3(*(const int *)x, *(const int *)y);
}

/* rows[lo..hi) is one stage, sorted by group then rank: no rank twice in a group, and every group
 * has every rank the stage has. scratch holds hi - lo ints. */
static int check_stage_groups(const char *name, const prs__rank_row *rows, size_t lo, size_t hi,
                              int *scratch, prs_error *err)
{
    size_t nr = 0;
    for (size_t i = lo; i < hi; i++) {
        if (i > lo && same_group(&rows[i], &rows[i - 1]) && rows[i].rank == rows[i - 1].rank)
            return FAIL(err, name, rows[i].line,
                        "rank %d has a second row for stage %d %s at %d MHz (first on line %d)",
                        rows[i].rank, rows[i].stage, prs_instr_name(rows[i].instr),
                        rows[i].freq_mhz, rows[i - 1].line);
        scratch[nr++] = rows[i].rank;
    }
    qsort(scratch, nr, sizeof *scratch, cmp_int);
    size_t nu = 0; /* the stage's ranks, ascending */
    for (size_t i = 0; i < nr; i++)
        if (nu == 0 || scratch[nu - 1] != scratch[i]) scratch[nu++] = scratch[i];
    for (size_t g = lo; g < hi;) {
        size_t e = g, k = 0;
        int first_line = rows[g].line;
        while (e < hi && same_group(&rows[e], &rows[g])) {
            if (rows[e].line < first_line) first_line = rows[e].line;
            e++;
        }
        for (size_t i = g; i < e && k < nu; i++, k++)
            if (rows[i].rank != scratch[k]) break;
        if (k < nu || e - g != nu) {
            int missing = scratch[k < nu ? k : 0], seen = 0;
            for (size_t i = lo; i < hi && !seen; i++)
                if (rows[i].rank == missing) seen = rows[i].line;
            return FAIL(
                err, name, first_line,
                "stage %d %s at %d MHz has no row from rank %d, which measured other "
                "clocks of stage %d (line %d): a stage's ranks must measure the same clocks",
                rows[g].stage, prs_instr_name(rows[g].instr), rows[g].freq_mhz, missing,
                rows[g].stage, seen);
        }
        g = e;
    }
    return PRS_OK;
}

static int by_line(const void *x, const void *y)
{
    return cmp3(((const prs_profile_row *)x)->line, ((const prs_profile_row *)y)->line);
}

/* rows sorted by group then rank: one combined row per group into out[], in file order. */
static size_t combine(const prs__rank_row *rows, size_t n, prs_profile_row *out)
{
    size_t m = 0;
    for (size_t g = 0; g < n;) {
        prs_profile_row r = {.stage = rows[g].stage,
                             .instr = rows[g].instr,
                             .freq_mhz = rows[g].freq_mhz,
                             .time_s = 0,
                             .energy_j = 0,
                             .line = rows[g].line};
        size_t e = g;
        for (; e < n && same_group(&rows[e], &rows[g]); e++) {
            if (rows[e].time_s > r.time_s) r.time_s = rows[e].time_s;
            r.energy_j += rows[e].energy_j;
            if (rows[e].line < r.line) r.line = rows[e].line;
        }
        out[m++] = r;
        g = e;
    }
    qsort(out, m, sizeof *out, by_line);
    return m;
}

int prs__profile_combine_ranks(prs_profile *p, const char *name, prs__rank_row *rows, size_t n,
                               prs_error *err)
{
    prs__rank_row *work = malloc(sizeof *work * (n ? n : 1));
    int *scratch = malloc(sizeof *scratch * (n ? n : 1));
    prs_profile_row *out = malloc(sizeof *out * (n ? n : 1));
    int rc = PRS_OK;
    if (!work || !scratch || !out) {
        rc = prs_error_set(err, PRS_ENOMEM, "%s: out of memory", name);
        goto done;
    }
    memcpy(work, rows, sizeof *work * n);
    rc = check_identities(name, work, n, err);
    if (rc == PRS_OK) rc = check_stages(name, rows, n, err);
    if (rc != PRS_OK) goto done;
    qsort(rows, n, sizeof *rows, by_group_rank_line);
    for (size_t lo = 0; lo < n && rc == PRS_OK;) {
        size_t hi = lo;
        while (hi < n && rows[hi].stage == rows[lo].stage)
            hi++;
        rc = check_stage_groups(name, rows, lo, hi, scratch, err);
        lo = hi;
    }
    if (rc != PRS_OK) goto done;
    size_t m = combine(rows, n, out);
    for (size_t i = 0; i < m && rc == PRS_OK; i++)
        rc = prs_profile_add(p, &out[i], err);
done:
    free(work);
    free(scratch);
    free(out);
    return rc;
}
