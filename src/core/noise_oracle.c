/* The shape oracle (include/perseus/noise.h, docs/noise.md 'What measuring can tell at all'):
 * the truth with one error of scale per group of identical computation types, as small as all
 * of the group's measurements allow. A planner given it knows every curve's shape and which
 * stages are the same, which no measurement tells; what it still gets wrong bounds what any
 * reconciliation of the measurements could get right.
 *
 * Steps: sort the rows by type (stage, instruction) and clock; find each type's fastest row and
 * the group it belongs to (the first type of its instruction with the same rows); draw two
 * normals per type in type order; scale every row by its group's draws and add the margin. */
#include <math.h>
#include <stdlib.h>

#include "perseus/noise.h"

#include "noise_rng.h"
#include "type_rows.h"

typedef struct otype {
    size_t first, n; /* its rows in the sorted order */
    size_t fastest;  /* the truth's row of its least time (the higher clock on a tie) */
    size_t group;    /* the first type with the same rows */
    size_t group_rows;
    double zt, ze;
} otype;

/* Do types a and b have the same instruction, clocks, times and energies? */
static int same_rows(const prs_profile_row *rows, const prs__type_row *s, const otype *a,
                     const otype *b)
{
    if (a->n != b->n || s[a->first].instr != s[b->first].instr) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const prs_profile_row *x = &rows[s[a->first + i].row], *y = &rows[s[b->first + i].row];
        if (x->freq_mhz != y->freq_mhz || x->time_s != y->time_s || x->energy_j != y->energy_j)
            return 0;
    }
    return 1;
}

/* The types of the sorted rows s[0..n) into t (at most n); their number. */
static size_t find_types(const prs_profile_row *rows, const prs__type_row *s, size_t n, otype *t)
{
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || s[i].stage != s[i - 1].stage || s[i].instr != s[i - 1].instr)
            t[nt++] = (otype){i, 0, s[i].row, 0, 0, 0, 0};
        otype *ty = &t[nt - 1];
        ty->n++;
        if (rows[s[i].row].time_s <= rows[ty->fastest].time_s) ty->fastest = s[i].row;
    }
    for (size_t k = 0; k < nt; k++) {
        t[k].group = k;
        for (size_t j = 0; j < k && t[k].group == k; j++)
            if (t[j].group == j && same_rows(rows, s, &t[j], &t[k])) t[k].group = j;
        t[t[k].group].group_rows += t[k].n;
    }
    return nt;
}

int prs_noise_oracle_check(const prs_noise_model *m, double margin, prs_error *err)
{
    int rc = prs_noise_model_check(m, err);
    if (rc) return rc;
    if (m->refresh_s > 0 || m->clock_bias > 0)
        return prs_error_set(err, PRS_EINVAL,
                             "noise oracle: models jitter only (no counter refresh, no clock "
                             "bias)");
    if (!(margin >= 0) || margin > PRS_NOISE_ORACLE_MAX_MARGIN)
        return prs_error_set(err, PRS_EINVAL, "noise oracle: the oracle margin must be in [0, %g]",
                             PRS_NOISE_ORACLE_MAX_MARGIN);
    return 0;
}

/* The oracle's rows, in the truth's order, into p. */
static int scale_rows(const prs_profile_row *rows, const prs__type_row *s, size_t n, const otype *t,
                      size_t nt, const prs_noise_model *m, double margin, prs_profile *p,
                      prs_error *err)
{
    size_t *type_of = malloc(sizeof *type_of * (n ? n : 1)); /* per truth row */
    if (!type_of) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (size_t k = 0; k < nt; k++)
        for (size_t i = t[k].first; i < t[k].first + t[k].n; i++)
            type_of[s[i].row] = k;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const otype *ty = &t[type_of[i]], *g = &t[ty->group];
        double sd = 1.0 / sqrt((double)m->repeats * (double)g->group_rows);
        prs_profile_row r = rows[i];
        r.time_s *= (1.0 + m->time_jitter * sd * g->zt) * (i == ty->fastest ? 1.0 : 1.0 + margin);
        r.energy_j *= 1.0 + m->energy_jitter * sd * g->ze;
        r.line = 0;
        rc = prs_profile_add(p, &r, err);
    }
    free(type_of);
    return rc;
}

int prs_noise_oracle_apply(const prs_profile *truth, const prs_noise_model *m, double margin,
                           uint64_t seed, prs_profile **out, prs_error *err)
{
    if (!out) return prs_error_set(err, PRS_EINVAL, "noise oracle: NULL output");
    *out = NULL;
    if (!truth) return prs_error_set(err, PRS_EINVAL, "noise oracle: NULL profile");
    int rc = prs_noise_oracle_check(m, margin, err);
    if (rc) return rc;
    size_t n = prs_profile_nrows(truth);
    const prs_profile_row *rows = prs_profile_rows(truth);
    prs__type_row *s = malloc(sizeof *s * (n ? n : 1));
    otype *t = malloc(sizeof *t * (n ? n : 1));
    prs_profile *p = prs_profile_new();
    if (!s || !t || !p) {
        free(s);
        free(t);
        prs_profile_free(p);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    prs__type_rows_sort(rows, n, s);
    size_t nt = find_types(rows, s, n, t);
    prs__rng r = prs__rng_seeded(seed);
    for (size_t k = 0; k < nt; k++) {
        t[k].zt = prs__rng_normal(&r);
        t[k].ze = prs__rng_normal(&r);
    }
    rc = scale_rows(rows, s, n, t, nt, m, margin, p, err);
    free(s);
    free(t);
    if (rc) {
        prs_profile_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
