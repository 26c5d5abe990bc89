/* Zeus's pipeline-frequency wire format (zeus_wire.h).
 *
 * The two Zeus dialects differ from API v1 in shape more than in meaning: clocks come with each
 * rank, a schedule is one clock per pipe-schedule entry (the artifact) or per computation with
 * its name (master), and a result is a set of per-instruction arrays, one list per iteration,
 * without iteration or microbatch numbers. This file turns one into the other. The clients are
 * permissive about extra fields (their servers ignore them), so unknown fields are ignored here
 * too; the fields that are read are checked strictly, and a bad one is named. */
#include "zeus_wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int bad(prs_error *err, const char *field, const char *what)
{
    return prs_error_set(err, PRS_EINVAL, "%s: %s", field, what);
}

/* An integer field in lo..hi; required or *v left alone. */
static int get_long(const json_t *o, const char *key, int required, long lo, long hi, long *v,
                    prs_error *err)
{
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) return required ? bad(err, key, "required") : 0;
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return prs_error_set(err, PRS_EINVAL, "%s: expected an integer in %ld..%ld", key, lo, hi);
    *v = (long)json_integer_value(x);
    return 0;
}

static int printable(const char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e) return 0;
    return 1;
}

int zw_parse_job(const json_t *body, zw_job *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(body)) return bad(err, "body", "expected a JSON object");
    if (get_long(body, "pp_degree", 1, 1, 1024, &out->pp, err) ||
        get_long(body, "dp_degree", 1, 1, 65536, &out->dp, err) ||
        get_long(body, "tp_degree", 1, 1, 65536, &out->tp, err) ||
        get_long(body, "world_size", 1, 1, 65536, &out->world, err) ||
        get_long(body, "num_microbatches", 0, 1, 4096, &out->microbatches, err))
        return PRS_EINVAL;
    if (out->pp * out->dp * out->tp != out->world)
        return prs_error_set(err, PRS_EINVAL,
                             "world_size: %ld is not pp_degree * dp_degree * tp_degree = %ld",
                             out->world, out->pp * out->dp * out->tp);
    const char *keys[] = {"model_name", "job_metadata"};
    for (int i = 0; i < 2 && !out->model[0]; i++) {
        json_t *m = json_object_get(body, keys[i]);
        if (!m || json_is_null(m)) continue;
        if (!json_is_string(m) || !printable(json_string_value(m)))
            return bad(err, keys[i], "expected a string of printable ASCII");
        snprintf(out->model, sizeof out->model, "%s", json_string_value(m));
    }
    return 0;
}

static int instr_kind(const char *name)
{
    return strcmp(name, "forward") == 0    ? ZW_FORWARD
           : strcmp(name, "backward") == 0 ? ZW_BACKWARD
                                           : ZW_OTHER;
}

static int parse_clocks(const json_t *body, const char *key, zw_rank *r, prs_error *err)
{
    json_t *a = json_object_get(body, key);
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    if (n < 1 || n > ZW_MAX_CLOCKS)
        return prs_error_set(err, PRS_EINVAL, "%s: expected an array of 1..%d clocks in MHz", key,
                             ZW_MAX_CLOCKS);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 100000)
            return prs_error_set(err, PRS_EINVAL, "%s[%zu]: expected an integer in 1..100000", key,
                                 i);
        long v = (long)json_integer_value(x);
        size_t at = 0; /* insert sorted, highest first, dropping repeats */
        while (at < r->nclocks && r->clocks_mhz[at] > v)
            at++;
        if (at < r->nclocks && r->clocks_mhz[at] == v) continue;
        memmove(&r->clocks_mhz[at + 1], &r->clocks_mhz[at],
                (r->nclocks - at) * sizeof r->clocks_mhz[0]);
        r->clocks_mhz[at] = v;
        r->nclocks++;
    }
    return 0;
}

static int parse_schedule(const json_t *body, zw_rank *r, prs_error *err)
{
    json_t *a = json_object_get(body, "pipe_schedule");
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    if (n < 1 || n > ZW_MAX_SCHEDULE)
        return prs_error_set(err, PRS_EINVAL, "pipe_schedule: expected an array of 1..%d names",
                             ZW_MAX_SCHEDULE);
    r->sched = malloc(n);
    if (!r->sched) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    r->nsched = n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_string(x))
            return prs_error_set(err, PRS_EINVAL, "pipe_schedule[%zu]: expected a string", i);
        r->sched[i] = (unsigned char)instr_kind(json_string_value(x));
    }
    return 0;
}

int zw_parse_rank(const json_t *body, int artifact, zw_rank *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(body)) return bad(err, "body", "expected a JSON object");
    if (get_long(body, "rank", 1, 0, 65535, &out->rank, err) ||
        get_long(body, "dp_rank", 1, 0, 65535, &out->dp, err) ||
        get_long(body, "pp_rank", 1, 0, 1023, &out->pp, err) ||
        get_long(body, "tp_rank", 1, 0, 65535, &out->tp, err))
        return PRS_EINVAL;
    if (!artifact) return parse_clocks(body, "available_frequencies", out, err);
    json_t *id = json_object_get(body, "job_id");
    if (!json_is_string(id) || strlen(json_string_value(id)) >= sizeof out->job_id)
        return bad(err, "job_id", "expected the string register_job answered");
    snprintf(out->job_id, sizeof out->job_id, "%s", json_string_value(id));
    return parse_schedule(body, out, err) || parse_clocks(body, "power_state_range", out, err)
               ? PRS_EINVAL
               : 0;
}

void zw_rank_free(zw_rank *r)
{
    free(r->sched);
    r->sched = NULL;
    r->nsched = 0;
}

void zw_1f1b_order(long S, long s, long M, unsigned char *kind, long *mb)
{
    long warm = S - s - 1 < M ? S - s - 1 : M, f = 0, b = 0, i = 0;
    for (; f < warm; f++, i++)
        kind[i] = ZW_FORWARD, mb[i] = f;
    while (f < M) {
        kind[i] = ZW_FORWARD, mb[i++] = f++;
        kind[i] = ZW_BACKWARD, mb[i++] = b++;
    }
    while (b < M)
        kind[i] = ZW_BACKWARD, mb[i++] = b++;
}

int zw_check_schedule(const zw_rank *r, long S, long M, prs_error *err)
{
    unsigned char *kind = malloc((size_t)(2 * M));
    long *mb = malloc((size_t)(2 * M) * sizeof *mb);
    if (!kind || !mb) {
        free(kind);
        free(mb);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    zw_1f1b_order(S, r->pp, M, kind, mb);
    long c = 0;
    int rc = 0;
    for (size_t i = 0; i < r->nsched && !rc; i++) {
        if (r->sched[i] == ZW_OTHER) continue;
        if (c >= 2 * M || r->sched[i] != kind[c])
            rc = prs_error_set(err, PRS_EINVAL,
                               "pipe_schedule[%zu]: computation %ld of stage %ld is not the one "
                               "1F1B runs with %ld stages and %ld microbatches (only 1F1B is "
                               "supported)",
                               i, c, r->pp, S, M);
        c++;
    }
    if (!rc && c != 2 * M)
        rc = prs_error_set(err, PRS_EINVAL,
                           "pipe_schedule: %ld computations, expected 2 * %ld microbatches", c, M);
    free(kind);
    free(mb);
    return rc;
}

json_t *zw_power_states(long rank, const unsigned char *sched, size_t nsched,
                        const long *clocks_mhz, size_t nclocks)
{
    json_t *a = json_array();
    size_t c = 0;
    long prev = nclocks ? clocks_mhz[0] : 0;
    for (size_t i = 0; a && i < nsched; i++) {
        if (sched[i] != ZW_OTHER && c < nclocks) prev = clocks_mhz[c++];
        json_array_append_new(a, json_integer(prev));
    }
    return json_pack("{s:I, s:o*}", "rank", (json_int_t)rank, "power_states", a);
}

json_t *zw_frequencies(long rank, long S, long s, long M, const long *clocks_mhz)
{
    unsigned char *kind = malloc((size_t)(2 * M));
    long *mb = malloc((size_t)(2 * M) * sizeof *mb);
    json_t *a = kind && mb ? json_array() : NULL;
    if (a) zw_1f1b_order(S, s, M, kind, mb);
    for (long i = 0; a && i < 2 * M; i++)
        json_array_append_new(a, json_pack("[s, I]", kind[i] == ZW_FORWARD ? "forward" : "backward",
                                           (json_int_t)clocks_mhz[i]));
    free(kind);
    free(mb);
    return json_pack("{s:I, s:o*}", "rank", (json_int_t)rank, "frequencies", a);
}

int zw_result_rank(const json_t *body, long *rank, prs_error *err)
{
    if (!json_is_object(body)) return bad(err, "body", "expected a JSON object");
    return get_long(body, "rank", 1, 0, 65535, rank, err);
}

/* A list of numbers (each finite and >= 0) into v[0..n); 0, or PRS_EINVAL naming it. */
static int numbers(const json_t *a, const char *field, size_t max, double *v, size_t *n,
                   prs_error *err)
{
    *n = 0;
    if (!json_is_array(a) || json_array_size(a) > max) {
        prs_error_set(err, PRS_EINVAL, "%s: expected an array of at most %zu numbers", field, max);
        return PRS_EINVAL;
    }
    size_t len = json_array_size(a);
    for (size_t i = 0; i < len; i++) {
        json_t *x = json_array_get(a, i);
        v[i] = json_is_number(x) ? json_number_value(x) : -1;
        if (!isfinite(v[i]) || v[i] < 0 || v[i] > 1e12) {
            prs_error_set(err, PRS_EINVAL, "%s[%zu]: expected a number >= 0", field, i);
            return PRS_EINVAL;
        }
    }
    *n = len;
    return 0;
}

/* The windows of one instruction in iteration it: appended to ws, their time and energy added
 * to *t and *e. A list of M + 1 drops its first; any other length but M, or no energies, gives
 * no windows. */
static int add_windows(const json_t *body, const zw_served *sv, int kind, size_t it, json_t *ws,
                       const unsigned char *order, const long *mbs, double *t, double *e,
                       prs_error *err)
{
    const char *name = kind == ZW_FORWARD ? "forward" : "backward";
    long M = sv->microbatches;
    json_t *tb = json_object_get(json_object_get(body, "time_breakdown"), name);
    json_t *eb = json_object_get(json_object_get(body, "energy_breakdown"), name);
    json_t *tl = json_array_get(tb, it), *el = json_array_get(eb, it);
    if (!tl || !el) return 0;
    double tv[4097], ev[4097];
    size_t nt = 0, ne = 0;
    char f[64];
    snprintf(f, sizeof f, "time_breakdown.%s[%zu]", name, it);
    if (numbers(tl, f, 4097, tv, &nt, err)) return PRS_EINVAL;
    snprintf(f, sizeof f, "energy_breakdown.%s[%zu]", name, it);
    if (numbers(el, f, 4097, ev, &ne, err)) return PRS_EINVAL;
    if (nt != ne || (nt != (size_t)M && nt != (size_t)M + 1)) return 0;
    size_t skip = nt - (size_t)M;
    for (long m = 0; m < M; m++) {
        double ts = tv[skip + (size_t)m], ej = ev[skip + (size_t)m];
        if (!(ts > 0) || !(ej > 0)) continue;
        long at = 0;
        while (at < 2 * M && !(order[at] == kind && mbs[at] == m))
            at++;
        json_array_append_new(ws, json_pack("{s:s, s:I, s:I, s:f, s:f}", "instruction", name,
                                            "microbatch", (json_int_t)m, "clock_mhz",
                                            (json_int_t)sv->clocks_mhz[at], "time_s", ts,
                                            "energy_j", ej));
        *t += ts;
        *e += ej;
    }
    return 0;
}

/* One v1 iteration from index it of the result. */
static json_t *one_iteration(const json_t *body, const zw_served *sv, size_t it, double time_s,
                             const double *energy, long number, const unsigned char *order,
                             const long *mbs, prs_error *err)
{
    json_t *ws = json_array();
    double t = 0, e = 0;
    if (!ws || add_windows(body, sv, ZW_FORWARD, it, ws, order, mbs, &t, &e, err) ||
        add_windows(body, sv, ZW_BACKWARD, it, ws, order, mbs, &t, &e, err)) {
        json_decref(ws);
        return NULL;
    }
    json_t *o = json_pack("{s:I, s:f, s:o}", "iteration", (json_int_t)number, "time_s", time_s,
                          "windows", ws);
    if (!o) return NULL;
    if (energy && *energy > 0) {
        json_object_set_new(o, "energy_j", json_real(*energy));
        /* What the GPU drew while not computing (communication, waiting), when that time is a
         * real part of the iteration: the job's measured blocking power is their median. */
        double idle_s = time_s - t, idle_j = *energy - e;
        if (json_array_size(ws) > 0 && idle_s > 0.01 * time_s && idle_j > 0 &&
            idle_j / idle_s <= 1e4)
            json_object_set_new(o, "blocking_power_w", json_real(idle_j / idle_s));
    }
    if (sv->round >= 0) /* profiling: one clock for every computation */
        json_object_set_new(o, "clock_mhz", json_integer(sv->clocks_mhz[0]));
    return o;
}

int zw_result_to_v1(const json_t *body, const zw_served *sv, long *next_iteration, long *rank,
                    size_t *n, json_t **iterations, prs_error *err)
{
    *iterations = NULL;
    *n = 0;
    if (zw_result_rank(body, rank, err)) return PRS_EINVAL;
    enum { MAX_ITERS = 256 };
    double times[MAX_ITERS], energies[MAX_ITERS];
    size_t nt = 0, ne = 0;
    json_t *ie = json_object_get(body, "iter_energy");
    if (numbers(json_object_get(body, "iter_time"), "iter_time", MAX_ITERS, times, &nt, err) ||
        (ie && numbers(ie, "iter_energy", MAX_ITERS, energies, &ne, err)))
        return PRS_EINVAL;
    if (ne != 0 && ne != nt)
        return prs_error_set(err, PRS_EINVAL,
                             "iter_energy: %zu values for %zu iterations (iter_time)", ne, nt);
    long M = sv->microbatches;
    unsigned char *order = malloc((size_t)(2 * M));
    long *mbs = malloc((size_t)(2 * M) * sizeof *mbs);
    json_t *out = order && mbs ? json_array() : NULL;
    if (!order || !mbs || !out) {
        free(order);
        free(mbs);
        json_decref(out);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    zw_1f1b_order(sv->stages, sv->stage, M, order, mbs);
    int rc = 0;
    for (size_t i = 0; !rc && i < nt; i++) {
        long number = (*next_iteration)++;
        if (!(times[i] > 0)) continue; /* an iteration without a time says nothing */
        json_t *o =
            one_iteration(body, sv, i, times[i], ne ? &energies[i] : NULL, number, order, mbs, err);
        if (!o)
            rc = err->code ? err->code : prs_error_set(err, PRS_ENOMEM, "out of memory");
        else
            json_array_append_new(out, o);
    }
    free(order);
    free(mbs);
    if (rc) {
        json_decref(out);
        return rc;
    }
    *n = nt;
    *iterations = out;
    return 0;
}
