/* Saving and loading a frontier directory (include/perseus/planner.h).
 *
 *   frontier.csv         time,energy per point, slowest first: the reference's
 *                        iteration_time_energy.csv, numbers printed as Python prints them, so
 *                        the published frontiers compare textually;
 *   frontier-detail.csv  index, planned and evaluated figures per point;
 *   plans.prs            everything needed to rebuild every plan: a header of key/value lines,
 *                        the first (all-slowest, not emitted) plan, then one line per point with
 *                        its figures and the computations whose clock changed ("op:MHz").
 * Consecutive plans differ in a few computations, so plans.prs stays small (GPT-3 M=96: 3,495
 * plans of 1,536 clocks each). Every file is written to a temporary name and renamed into
 * place, so a crash never leaves a half-written frontier behind a complete-looking name.
 *
 * plans.prs also travels without a file (prs_frontier_to_plans / prs_frontier_from_plans, for
 * the server's database): the same writer and reader run on a memory stream (open_memstream,
 * fmemopen: POSIX 2008), so the text in memory is the text on disk. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontier_int.h"
#include "perseus/limits.h"
#include "perseus/numfmt.h"

#define PLANS_MAGIC "perseus-plans 1"

/* Longest header line of plans.prs; the longest base and point lines follow from the number of
 * computations (max_line). */
#define PLANS_HEADER_LINE 1024

typedef int (*writer_fn)(const prs_frontier *f, FILE *out);

/* Why a point is not one the planner makes (its figures, and its evaluated time a whole number
 * of units as the planner computes it), or NULL. The writer and the reader both refuse such
 * points. */
static const char *point_problem(const prs_frontier_point *p, double unit_s)
{
    if (p->time_units < 0 || (double)p->time_units > PRS_MAX_PATH_UNITS || !isfinite(p->time_s))
        return "time units outside 0..2^62";
    if (!(p->energy_j >= 0) || !isfinite(p->energy_j)) return "energy is not a finite number >= 0";
    if (!isfinite(p->cost_change_j)) return "cost change is not a finite number";
    if (!(p->eval_energy_j >= 0) || !isfinite(p->eval_energy_j))
        return "evaluated energy is not a finite number >= 0";
    double units = p->eval_time_s / unit_s;
    if (!(units >= 0) || units > PRS_MAX_PATH_UNITS ||
        fabs(units - nearbyint(units)) > 1e-6 * fmax(1, units))
        return "evaluated time is not a whole number >= 0 of unit_time";
    return NULL;
}

static int write_frontier_csv(const prs_frontier *f, FILE *out)
{
    char t[PRS_NUMFMT_MAX], e[PRS_NUMFMT_MAX];
    fputs("time,energy\n", out);
    for (size_t k = 0; k < f->npoints; k++)
        fprintf(out, "%s,%s\n", prs_num_fmt_double(t, sizeof t, f->pts[k].time_s),
                prs_num_fmt_double(e, sizeof e, f->pts[k].energy_j));
    return 0;
}

static int write_detail_csv(const prs_frontier *f, FILE *out)
{
    char b[6][PRS_NUMFMT_MAX];
    fputs("index,time_units,time,energy,cost_change,eval_time,eval_energy,bound\n", out);
    for (size_t k = 0; k < f->npoints; k++) {
        const prs_frontier_point *p = &f->pts[k];
        if (p->bound_j > 0)
            prs_num_fmt_double(b[5], sizeof b[5], p->bound_j);
        else
            b[5][0] = '\0'; /* unknown (exp) */
        fprintf(out, "%zu,%ld,%s,%s,%s,%s,%s,%s\n", k, p->time_units,
                prs_num_fmt_double(b[0], sizeof b[0], p->time_s),
                prs_num_fmt_double(b[1], sizeof b[1], p->energy_j),
                prs_num_fmt_double(b[2], sizeof b[2], p->cost_change_j),
                prs_num_fmt_double(b[3], sizeof b[3], p->eval_time_s),
                prs_num_fmt_double(b[4], sizeof b[4], p->eval_energy_j), b[5]);
    }
    return 0;
}

static int write_plans(const prs_frontier *f, FILE *out)
{
    char a[PRS_NUMFMT_MAX], b[PRS_NUMFMT_MAX], c[PRS_NUMFMT_MAX], d[PRS_NUMFMT_MAX];
    fprintf(out, "%s\nstages %d\nmicrobatches %d\nschedule %s\nvirtual_stages %d\nunit_time %s\n",
            PLANS_MAGIC, f->pipe.stages, f->pipe.microbatches, prs_schedule_name(f->pipe.schedule),
            f->pipe.virtual_stages > 1 ? f->pipe.virtual_stages : 1,
            prs_num_fmt_double(a, sizeof a, f->pipe.unit_time_s));
    fprintf(out, "blocking_power %s\n", prs_num_fmt_double(a, sizeof a, f->pipe.blocking_power_w));
    if (f->pipe.change_cost_s > 0) /* absent when changes are free, as before the option */
        fprintf(out, "change_cost %s\n", prs_num_fmt_double(a, sizeof a, f->pipe.change_cost_s));
    fprintf(out, "cost_model %s\npoints %zu\nbase", prs_cost_model_name(f->model), f->npoints);
    for (int i = 0; i < f->nops; i++)
        fprintf(out, " %d", f->base[i]);
    fputc('\n', out);
    for (size_t k = 0; k < f->npoints; k++) {
        const prs_frontier_point *p = &f->pts[k];
        fprintf(out, "p %ld %s %s %s %s", p->time_units,
                prs_num_fmt_double(a, sizeof a, p->energy_j),
                prs_num_fmt_double(b, sizeof b, p->cost_change_j),
                prs_num_fmt_double(c, sizeof c, p->eval_time_s),
                prs_num_fmt_double(d, sizeof d, p->eval_energy_j));
        if (p->bound_j > 0) fprintf(out, " bound=%s", prs_num_fmt_double(a, sizeof a, p->bound_j));
        for (size_t i = f->dstart[k]; i < f->dstart[k + 1]; i++)
            fprintf(out, " %d:%d", f->dop[i], f->dfreq[i]);
        fputc('\n', out);
    }
    return 0;
}

static int write_atomically(const char *dir, const char *name, const prs_frontier *f, writer_fn fn,
                            prs_error *err)
{
    size_t n = strlen(dir) + strlen(name) + 16;
    char *path = malloc(n), *tmp = malloc(n);
    if (!path || !tmp) {
        free(path);
        free(tmp);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    snprintf(path, n, "%s/%s", dir, name);
    snprintf(tmp, n, "%s/.%s.tmp", dir, name);
    int rc = 0;
    FILE *out = fopen(tmp, "w");
    if (!out) {
        rc = prs_error_set(err, PRS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    fn(f, out);
    int bad = ferror(out);
    if (fclose(out) != 0 || bad) {
        rc = prs_error_set(err, PRS_EIO, "%s: write failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        rc = prs_error_set(err, PRS_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
        unlink(tmp);
    }
done:
    free(path);
    free(tmp);
    return rc;
}

/* PRS_ERANGE (message naming where and the point) if a point is one the reader refuses
 * (point_problem): written, it would make files that do not load again. */
static int check_points(const prs_frontier *f, const char *where, prs_error *err)
{
    for (size_t k = 0; k < f->npoints; k++) {
        const char *why = point_problem(&f->pts[k], f->pipe.unit_time_s);
        if (why)
            return prs_error_set(err, PRS_ERANGE, "%s: point %zu: %s: not written", where, k, why);
    }
    return 0;
}

int prs_frontier_save(const prs_frontier *f, const char *dir, prs_error *err)
{
    struct stat st;
    int rc = check_points(f, dir, err);
    if (rc) return rc;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return prs_error_set(err, PRS_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return prs_error_set(err, PRS_EIO, "%s: not a directory", dir);
    if ((rc = write_atomically(dir, "plans.prs", f, write_plans, err))) return rc;
    if ((rc = write_atomically(dir, "frontier-detail.csv", f, write_detail_csv, err))) return rc;
    return write_atomically(dir, "frontier.csv", f, write_frontier_csv, err);
}

/* ---- loading ---- */

typedef struct reader {
    const char *path;
    FILE *in;
    char *line;
    size_t cap;
    size_t max_line; /* longest line accepted, newline not counted */
    long lineno;
    const char *fault; /* why next_line failed, when not at the end of the input */
    prs_error *err;
} reader;

/* The next line into r->line, without its newline: 0, or -1 (r->fault set when the input did
 * not just end: an embedded NUL, a line longer than r->max_line, no memory). Reads at most
 * r->max_line + 1 bytes, so no input makes it allocate more. */
static int next_line(reader *r)
{
    int c = getc(r->in);
    if (c == EOF) return -1;
    r->lineno++;
    size_t n = 0;
    for (; c != EOF && c != '\n'; c = getc(r->in)) {
        if (c == '\0') return r->fault = "embedded NUL byte", -1;
        if (n == r->max_line)
            return r->fault =
                       "line too long (longer than any line a plans file of this pipeline holds)",
                   -1;
        if (n + 1 >= r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 256;
            char *l = realloc(r->line, cap);
            if (!l) return r->fault = "out of memory", -1;
            memset(l + r->cap, 0, cap - r->cap); /* every byte defined, as the parsers assume */
            r->line = l;
            r->cap = cap;
        }
        r->line[n++] = (char)c;
    }
    if (!r->line && !(r->line = calloc(r->cap = 256, 1))) return r->fault = "out of memory", -1;
    r->line[n] = '\0';
    return 0;
}

static int bad(reader *r, const char *what)
{
    prs_error_set(r->err, PRS_EPARSE, "%s:%ld: %s", r->path, r->lineno, r->fault ? r->fault : what);
    return PRS_EPARSE; /* what prs_error_set returns, visibly non-zero to static analysis */
}

/* Read "key value" and return value (points into r->line). */
static const char *keyed(reader *r, const char *key)
{
    if (next_line(r) != 0) return NULL;
    size_t k = strlen(key);
    if (strncmp(r->line, key, k) != 0 || r->line[k] != ' ') return NULL;
    return r->line + k + 1;
}

static int parse_header(reader *r, prs_pipeline *pipe, prs_cost_model *model, size_t *npoints)
{
    const char *v;
    long points;
    if (next_line(r) != 0 || strcmp(r->line, PLANS_MAGIC) != 0)
        return bad(r, "not a perseus plans file (expected '" PLANS_MAGIC "')");
    if (!(v = keyed(r, "stages")) || prs_num_parse_int(v, &pipe->stages))
        return bad(r, "expected 'stages N'");
    if (!(v = keyed(r, "microbatches")) || prs_num_parse_int(v, &pipe->microbatches))
        return bad(r, "expected 'microbatches N'");
    if (!(v = keyed(r, "schedule")) || prs_schedule_parse(v, &pipe->schedule))
        return bad(r, "expected 'schedule NAME' with a known schedule");
    if (!(v = keyed(r, "virtual_stages")) || prs_num_parse_int(v, &pipe->virtual_stages))
        return bad(r, "expected 'virtual_stages N'");
    if (!(v = keyed(r, "unit_time")) || prs_num_parse_double(v, &pipe->unit_time_s))
        return bad(r, "expected 'unit_time SECONDS'");
    if (!(v = keyed(r, "blocking_power")) || prs_num_parse_double(v, &pipe->blocking_power_w))
        return bad(r, "expected 'blocking_power WATTS'");
    if ((v = keyed(r, "change_cost")) && prs_num_parse_double(v, &pipe->change_cost_s))
        return bad(r, "expected 'change_cost SECONDS'");
    if (v) /* the optional change cost was there: the cost model follows */
        v = keyed(r, "cost_model");
    else if (!r->fault && strncmp(r->line, "cost_model ", 11) == 0)
        v = r->line + 11;
    if (!v || prs_cost_model_parse(v, model)) return bad(r, "expected 'cost_model exp|hull'");
    if (!(v = keyed(r, "points")) || prs_num_parse_long(v, &points) || points < 0 ||
        points > PRS_MAX_FRONTIER_POINTS)
        return bad(r, "expected 'points N' with N at most 100000000");
    prs_error why = {0, ""};
    if (prs_pipeline_check(pipe, &why) != 0) return bad(r, why.msg);
    *npoints = (size_t)points;
    return 0;
}

/* Next whitespace-separated token of *s (modified in place), or NULL. */
static char *token(char **s)
{
    char *p = *s;
    while (*p == ' ')
        p++;
    if (!*p) return NULL;
    char *start = p;
    while (*p && *p != ' ')
        p++;
    if (*p) *p++ = '\0';
    *s = p;
    return start;
}

static int parse_point(reader *r, prs_frontier *f, int *ops, int *freqs)
{
    char *s = r->line, *tok;
    prs_frontier_point pt;
    if (!(tok = token(&s)) || strcmp(tok, "p") != 0) return bad(r, "expected a point line 'p ...'");
    if (!(tok = token(&s)) || prs_num_parse_long(tok, &pt.time_units))
        return bad(r, "bad time units");
    double *fields[] = {&pt.energy_j, &pt.cost_change_j, &pt.eval_time_s, &pt.eval_energy_j};
    for (int i = 0; i < 4; i++)
        if (!(tok = token(&s)) || prs_num_parse_double(tok, fields[i]))
            return bad(r, "bad number in point line");
    pt.time_s = (double)pt.time_units * f->pipe.unit_time_s;
    const char *why = point_problem(&pt, f->pipe.unit_time_s);
    if (why) return bad(r, why);
    pt.bound_j = 0;
    while (*s == ' ')
        s++;
    if (strncmp(s, "bound=", 6) == 0) { /* hull's lower bound, before the changes */
        tok = token(&s);
        if (prs_num_parse_double(tok + 6, &pt.bound_j) || !(pt.bound_j > 0) ||
            !isfinite(pt.bound_j))
            return bad(r, "bad bound 'bound=J' in point line");
    }
    size_t n = 0;
    while ((tok = token(&s))) {
        char *colon = strchr(tok, ':');
        if (!colon || (size_t)n >= (size_t)f->nops) return bad(r, "bad change 'op:MHz'");
        *colon = '\0';
        if (prs_num_parse_int(tok, &ops[n]) || ops[n] < 0 || ops[n] >= f->nops ||
            prs_num_parse_int(colon + 1, &freqs[n]) || freqs[n] <= 0)
            return bad(r, "bad change 'op:MHz'");
        n++;
    }
    if (prs__frontier_push(f, &pt, ops, freqs, n))
        return prs_error_set(r->err, PRS_ENOMEM, "out of memory");
    return 0;
}

/* Read plans.prs from in (named path in messages) into *out; a text of no points only when
 * allow_empty. */
static int load_stream(const char *path, FILE *in, int allow_empty, prs_frontier **out,
                       prs_error *err)
{
    reader r = {path, in, NULL, 0, PLANS_HEADER_LINE, 0, NULL, err};
    prs_frontier *f = NULL;
    int *base = NULL, *ops = NULL, *freqs = NULL;
    int rc;
    prs_pipeline pipe = {0};
    prs_cost_model model = PRS_COST_EXP;
    size_t npoints = 0;
    if ((rc = parse_header(&r, &pipe, &model, &npoints))) goto out;
    if (npoints == 0 && !allow_empty) {
        rc = bad(&r, "points 0: a plans file holds at least one plan");
        goto out;
    }
    int nops = pipe.stages * prs_ops_per_stage(&pipe);
    /* base: one clock per computation; a point: its figures and at most one change each */
    r.max_line = 5 * PRS_NUMFMT_MAX + 72 + (size_t)nops * 24;
    base = malloc(sizeof *base * (size_t)nops);
    ops = malloc(sizeof *ops * (size_t)nops);
    freqs = malloc(sizeof *freqs * (size_t)nops);
    if (!base || !ops || !freqs) {
        rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
        goto out;
    }
    if (next_line(&r) != 0 || strncmp(r.line, "base", 4) != 0) {
        rc = bad(&r, "expected 'base' followed by one clock per computation");
        goto out;
    }
    char *s = r.line + 4, *tok;
    for (int i = 0; i < nops; i++)
        if (!(tok = token(&s)) || prs_num_parse_int(tok, &base[i]) || base[i] <= 0) {
            rc = bad(&r, "base plan: expected one positive clock per computation");
            goto out;
        }
    if (token(&s)) {
        rc = bad(&r, "base plan: more clocks than computations");
        goto out;
    }
    if (!(f = prs__frontier_new(&pipe, model, base))) {
        rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < npoints; k++) {
        if (next_line(&r) != 0) {
            rc = bad(&r, "file ends before all points were read");
            goto out;
        }
        if ((rc = parse_point(&r, f, ops, freqs))) goto out;
    }
    if (next_line(&r) == 0 || r.fault) {
        rc = bad(&r, "unexpected data after the last point");
        goto out;
    }
    *out = f;
    f = NULL;
    rc = 0;
out:
    free(r.line);
    free(base);
    free(ops);
    free(freqs);
    prs_frontier_free(f);
    return rc;
}

int prs_frontier_load(const char *dir, prs_frontier **out, prs_error *err)
{
    *out = NULL;
    size_t n = strlen(dir) + 16;
    char *path = malloc(n);
    if (!path) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    snprintf(path, n, "%s/plans.prs", dir);
    FILE *in = fopen(path, "r");
    int rc = in ? load_stream(path, in, 0, out, err)
                : prs_error_set(err, PRS_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (in) fclose(in);
    free(path);
    return rc;
}

int prs_frontier_from_plans(const char *name, const void *text, size_t len, prs_frontier **out,
                            prs_error *err)
{
    *out = NULL;
    /* fmemopen may refuse a zero size: an empty text reads as one NUL byte, refused the same */
    FILE *in = len ? fmemopen((void *)text, len, "r") : fmemopen((void *)"", 1, "r");
    if (!in)
        return prs_error_set(err, PRS_ENOMEM, "%s: cannot open in memory: %s", name,
                             strerror(errno));
    int rc = load_stream(name, in, 1, out, err);
    fclose(in);
    return rc;
}

int prs_frontier_to_plans(const prs_frontier *f, char **text, size_t *len, prs_error *err)
{
    *text = NULL;
    *len = 0;
    int rc = check_points(f, "plans.prs in memory", err);
    if (rc) return rc;
    char *buf = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&buf, &n);
    if (!out) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    write_plans(f, out);
    int bad = ferror(out);
    if (fclose(out) != 0 || bad) {
        free(buf);
        return prs_error_set(err, PRS_ENOMEM, "plans.prs in memory: write failed");
    }
    *text = buf;
    *len = n;
    return 0;
}
