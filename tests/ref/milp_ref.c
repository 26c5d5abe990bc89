/* The MILP (milp_ref.h). Variables: an event time x_v >= 0 per node of the activity-on-arc
 * schedule graph (x_source = 0, x_sink <= T) and a binary z_{op,k} per computation and option;
 * rows: sum_k z_{op,k} = 1 per computation, x_to - x_from - sum_k q_k z_{op,k} >= 0 per
 * computation arc, x_to - x_from >= 0 per dummy arc. Objective: sum of effective energies
 * (e - P_block q tau) of the chosen options. Its LP relaxation is the convex-hull relaxation the
 * hull planner walks, so the root bound is the planner's own lower bound. The model is built
 * once as a GLPK problem; GLPK's branch and cut solves it here, CBC's in milp_cbc.c. */
#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "milp_int.h"

double prs__milp_eff_cost(const prs_milp *m, int k)
{
    const prs__table_table *t = &m->ev->t;
    return t->energy_j[k] - m->pipe.blocking_power_w * (double)t->q[k] * m->pipe.unit_time_s;
}

/* Options of every type not dominated in (q, effective cost); ties keep the first. */
static int keep_options(prs_milp *m)
{
    const prs__table_table *t = &m->ev->t;
    m->ostart = malloc(sizeof *m->ostart * (size_t)(t->ntypes + 1));
    m->opt = malloc(sizeof *m->opt * (size_t)(t->start[t->ntypes] + 1));
    if (!m->ostart || !m->opt) return -1;
    int n = 0;
    for (int ty = 0; ty < t->ntypes; ty++) {
        m->ostart[ty] = n;
        for (int i = t->start[ty]; i < t->start[ty + 1]; i++) {
            int dom = 0;
            for (int j = t->start[ty]; j < t->start[ty + 1] && !dom; j++) {
                if (j == i) continue;
                double ci = prs__milp_eff_cost(m, i), cj = prs__milp_eff_cost(m, j);
                if (t->q[j] <= t->q[i] && cj <= ci && (t->q[j] < t->q[i] || cj < ci)) dom = 1;
                if (j < i && t->q[j] == t->q[i] && cj == ci) dom = 1;
            }
            if (!dom) m->opt[n++] = i;
        }
    }
    m->ostart[t->ntypes] = n;
    return 0;
}

static int build(prs_milp *m)
{
    const prs__graph_graph *g = &m->ev->g;
    m->nops = g->nops;
    m->col0 = malloc(sizeof *m->col0 * (size_t)g->nops);
    m->nopt = malloc(sizeof *m->nopt * (size_t)g->nops);
    if (!m->col0 || !m->nopt || keep_options(m)) return -1;
    int nz = 0;
    for (int op = 0; op < g->nops; op++) {
        int ty = g->op_type[op];
        m->nopt[op] = m->ostart[ty + 1] - m->ostart[ty];
        m->col0[op] = g->nnodes + 1 + nz;
        nz += m->nopt[op];
    }
    m->ncols = g->nnodes + nz;
    m->lp = glp_create_prob();
    glp_set_obj_dir(m->lp, GLP_MIN);
    glp_add_cols(m->lp, m->ncols);
    glp_add_rows(m->lp, g->narcs + g->nops);
    size_t cap = 2 * (size_t)g->narcs + 2 * (size_t)nz + 1;
    int *ia = malloc(sizeof *ia * cap), *ja = malloc(sizeof *ja * cap);
    double *ar = malloc(sizeof *ar * cap);
    if (!ia || !ja || !ar) {
        free(ia);
        free(ja);
        free(ar);
        return -1;
    }
    for (int v = 0; v < g->nnodes; v++)
        glp_set_col_bnds(m->lp, v + 1, v == g->source ? GLP_FX : GLP_LO, 0, 0);
    m->col_sink = g->sink + 1;
    int k = 0;
    for (int a = 0; a < g->narcs; a++) {
        const prs__graph_arc *arc = &g->arcs[a];
        ++k, ia[k] = a + 1, ja[k] = arc->to + 1, ar[k] = 1;
        ++k, ia[k] = a + 1, ja[k] = arc->from + 1, ar[k] = -1;
        glp_set_row_bnds(m->lp, a + 1, GLP_LO, 0, 0);
        if (arc->op < 0) continue;
        int op = arc->op, ty = g->op_type[op];
        for (int i = 0; i < m->nopt[op]; i++) {
            int e = m->opt[m->ostart[ty] + i], col = m->col0[op] + i;
            ++k, ia[k] = a + 1, ja[k] = col, ar[k] = -(double)m->ev->t.q[e];
            ++k, ia[k] = g->narcs + op + 1, ja[k] = col, ar[k] = 1;
            glp_set_col_kind(m->lp, col, GLP_BV);
            glp_set_obj_coef(m->lp, col, prs__milp_eff_cost(m, e));
        }
    }
    for (int op = 0; op < g->nops; op++)
        glp_set_row_bnds(m->lp, g->narcs + op + 1, GLP_FX, 1, 1);
    glp_load_matrix(m->lp, k, ia, ja, ar);
    free(ia);
    free(ja);
    free(ar);
    return 0;
}

prs_milp *prs_milp_new(const prs_profile *profile, const prs_pipeline *pipe, prs_error *err)
{
    prs_milp *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->pipe = *pipe;
    m->solver = PRS_MILP_GLPK;
    m->threads = 1;
    if (prs_eval_open(profile, pipe, &m->ev, err)) {
        free(m);
        return NULL;
    }
    if (build(m)) {
        prs_milp_free(m);
        prs_error_set(err, PRS_ENOMEM, "out of memory building the MILP");
        return NULL;
    }
    return m;
}

void prs_milp_free(prs_milp *m)
{
    if (!m) return;
    if (m->lp) glp_delete_prob(m->lp);
    prs_eval_close(m->ev);
    free(m->col0);
    free(m->nopt);
    free(m->opt);
    free(m->ostart);
    free(m);
}

int prs__milp_start_x(const prs_milp *m, const int *start, double *x)
{
    const prs__graph_graph *g = &m->ev->g;
    long *dur = malloc(sizeof *dur * (size_t)g->nops);
    long *earliest = malloc(sizeof *earliest * (size_t)g->nnodes);
    int ok = dur && earliest;
    memset(x, 0, sizeof *x * ((size_t)m->ncols + 1));
    for (int op = 0; ok && op < g->nops; op++) {
        int ty = g->op_type[op], found = -1;
        int e = prs__table_find(&m->ev->t, ty, start[op]);
        for (int i = 0; e >= 0 && i < m->nopt[op]; i++) {
            int o = m->opt[m->ostart[ty] + i];
            double co = prs__milp_eff_cost(m, o);
            /* the kept option at least as good as the plan's clock, the cheapest such */
            if (m->ev->t.q[o] <= m->ev->t.q[e] && co <= prs__milp_eff_cost(m, e) &&
                (found < 0 || co < prs__milp_eff_cost(m, m->opt[m->ostart[ty] + found])))
                found = i;
        }
        if (found < 0) {
            ok = 0;
        } else {
            x[m->col0[op] + found] = 1;
            dur[op] = m->ev->t.q[m->opt[m->ostart[ty] + found]];
        }
    }
    if (ok) {
        prs__graph_cpm(g, dur, earliest, NULL);
        for (int v = 0; v < g->nnodes; v++)
            x[v + 1] = (double)earliest[v];
    }
    free(dur);
    free(earliest);
    return ok ? 0 : -1;
}

int prs__milp_finish(const prs_milp *m, long T, int status, double obj, double bound,
                     const double *x, prs_milp_result *res, int *clocks, prs_error *err)
{
    const prs__graph_graph *g = &m->ev->g;
    double block =
        (double)m->pipe.stages * m->pipe.blocking_power_w * (double)T * m->pipe.unit_time_s;
    res->status = status;
    res->energy_j = obj + block;
    res->bound_j = status == PRS_MILP_OPTIMAL ? res->energy_j : bound + block;
    if (res->bound_j > res->energy_j) res->bound_j = res->energy_j;
    long *dur = malloc(sizeof *dur * (size_t)g->nops);
    long *earliest = malloc(sizeof *earliest * (size_t)g->nnodes);
    if (!dur || !earliest) {
        free(dur);
        free(earliest);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    for (int op = 0; op < g->nops; op++) {
        int ty = g->op_type[op], pick = 0;
        for (int i = 0; i < m->nopt[op]; i++)
            if (x[m->col0[op] + i] > 0.5) pick = i;
        int e = m->opt[m->ostart[ty] + pick];
        dur[op] = m->ev->t.q[e];
        if (clocks) clocks[op] = m->ev->t.freq[e];
    }
    res->plan_units = prs__graph_cpm(g, dur, earliest, NULL);
    free(dur);
    free(earliest);
    return 0;
}

double prs__milp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int prs_milp_set_solver(prs_milp *m, prs_milp_solver solver, int threads)
{
    if (solver != PRS_MILP_GLPK && solver != PRS_MILP_CBC) return -1;
    if (threads < 1 || threads > 64) return -1;
    m->solver = solver;
    m->threads = threads;
    return 0;
}

/* Branch-and-cut callback: offer the known plan once as an incumbent, track the best bound. */
static void callback(glp_tree *tree, void *info)
{
    prs_milp *m = info;
    int reason = glp_ios_reason(tree);
    if (reason == GLP_IHEUR && m->start && !m->gave_start) {
        m->gave_start = 1;
        double *x = malloc(sizeof *x * ((size_t)m->ncols + 1));
        if (x && prs__milp_start_x(m, m->start, x) == 0) glp_ios_heur_sol(tree, x);
        free(x);
    }
    int best = glp_ios_best_node(tree);
    if (best) {
        double b = glp_ios_node_bound(tree, best);
        if (b > m->bound) m->bound = b;
    }
}

static int solve_glpk(prs_milp *m, long T, const int *start, double time_limit_s,
                      prs_milp_result *res, int *clocks, prs_error *err)
{
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_OFF; /* the callback's incumbent is in the original columns */
    parm.tm_lim = (int)(time_limit_s * 1000);
    parm.mip_gap = PRS_MILP_GAP;
    parm.cb_func = callback;
    parm.cb_info = m;
    m->start = start;
    m->gave_start = 0;
    double t0 = prs__milp_now();
    glp_smcp sparm;
    glp_init_smcp(&sparm);
    sparm.msg_lev = GLP_MSG_OFF;
    int rc = glp_simplex(m->lp, &sparm);
    if (rc == 0 && glp_get_status(m->lp) == GLP_NOFEAS) {
        res->status = PRS_MILP_INFEASIBLE;
        res->seconds = prs__milp_now() - t0;
        return 0;
    }
    if (rc != 0 || glp_get_status(m->lp) != GLP_OPT)
        return prs_error_set(err, PRS_EINVAL, "LP relaxation failed (%d) at T = %ld", rc, T);
    m->bound = glp_get_obj_val(m->lp);
    rc = glp_intopt(m->lp, &parm);
    res->seconds = prs__milp_now() - t0;
    int st = glp_mip_status(m->lp);
    if (st == GLP_NOFEAS || rc == GLP_ENOPFS) {
        res->status = PRS_MILP_INFEASIBLE;
        return 0;
    }
    if (rc != 0 && rc != GLP_ETMLIM && rc != GLP_EMIPGAP)
        return prs_error_set(err, PRS_EINVAL, "glp_intopt failed (%d) at T = %ld", rc, T);
    if (st != GLP_OPT && st != GLP_FEAS)
        return prs_error_set(err, PRS_EINVAL,
                             "no integer solution within the time limit at T = %ld", T);
    double *x = malloc(sizeof *x * ((size_t)m->ncols + 1));
    if (!x) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (int j = 1; j <= m->ncols; j++)
        x[j] = glp_mip_col_val(m->lp, j);
    /* stopped at the relative gap PRS_MILP_GAP: optimal by the convention CBC follows too */
    int proven = (rc == 0 && st == GLP_OPT) || rc == GLP_EMIPGAP;
    rc = prs__milp_finish(m, T, proven ? PRS_MILP_OPTIMAL : PRS_MILP_FEASIBLE,
                          glp_mip_obj_val(m->lp), m->bound, x, res, clocks, err);
    free(x);
    return rc;
}

int prs_milp_solve(prs_milp *m, long T, const int *start, double time_limit_s, prs_milp_result *res,
                   int *clocks, prs_error *err)
{
    memset(res, 0, sizeof *res);
    glp_set_col_bnds(m->lp, m->col_sink, T > 0 ? GLP_DB : GLP_FX, 0, (double)T);
    if (m->solver == PRS_MILP_CBC)
        return prs__milp_solve_cbc(m, T, start, time_limit_s, res, clocks, err);
    return solve_glpk(m, T, start, time_limit_s, res, clocks, err);
}
