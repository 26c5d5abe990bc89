/* plan_memory: the planner's peak-memory estimate (prs_plan_measure, docs/planner.md, 'Memory')
 * against the peak it measures, for synthetic pipelines from small to the server's largest
 * (512 stages x 1024 microbatches, 1,048,576 computations).
 *
 * Each case runs in a forked child: it makes the synthetic profile (two clocks, 1410 and 1200
 * MHz, so the walk is short), asks prs_plan_measure for the estimate, reads its own peak RSS
 * (ru_maxrss), plans, and reads it again; the difference is the planner's peak resident memory
 * (an upper bound of what planning added: the child's resident set before it is the profile and
 * the libraries). The report gives both and their ratio, and judges the estimate: it must not be
 * below the measured peak (the server's --max-plan-memory relies on it), and should be within
 * twice it. Exit 1 when an estimate is below its measured peak or a case fails; 0 otherwise.
 * --quick: the small cases only (CTest runs these: tests/cli/plan_memory.sh). */
#define _DEFAULT_SOURCE /* NOLINT(bugprone-reserved-identifier): wait4 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perseus/clock.h"
#include "perseus/planner.h"
#include "perseus/synth.h"

typedef struct plan_case {
    int stages, microbatches;
    double unit_s;
    prs_cost_model model;
    int threads;
    int quick; /* run by --quick */
} plan_case;

static const plan_case cases[] = {
    {16, 64, 0.002, PRS_COST_EXP, 1, 1},   {16, 64, 0.002, PRS_COST_HULL, 1, 1},
    {64, 256, 0.03, PRS_COST_EXP, 1, 1},   {64, 256, 0.03, PRS_COST_HULL, 1, 1},
    {64, 256, 0.03, PRS_COST_HULL, 2, 1},  {128, 512, 0.05, PRS_COST_EXP, 1, 0},
    {128, 512, 0.05, PRS_COST_HULL, 1, 0}, {128, 512, 0.05, PRS_COST_HULL, 4, 0},
    {512, 1024, 0.04, PRS_COST_EXP, 1, 0}, {512, 1024, 0.04, PRS_COST_HULL, 1, 0},
};

/* What a child reports. */
typedef struct result {
    int rc;
    double estimate_b, before_kb, after_kb, secs;
    long ops, span;
    size_t points;
} result;

static long maxrss_kb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static void run_case(const plan_case *c, result *out)
{
    memset(out, 0, sizeof *out);
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = c->stages;
    so.f_min_mhz = 1200;
    so.f_max_mhz = 1410;
    so.f_step_mhz = 210;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = (prs_pipeline){c->stages, c->microbatches, PRS_SCHEDULE_1F1B, c->unit_s, 80, 0, 0};
    o.cost_model = c->model;
    o.frontier = PRS_FRONTIER_CLEAN;
    o.threads = c->threads;
    prs_plan_measures m;
    if ((out->rc = prs_synth_profile(&so, &p, &err)) ||
        (out->rc = prs_plan_measure(p, &o, NULL, &m, &err))) {
        fprintf(stderr, "plan_memory: %s\n", err.msg);
        return;
    }
    out->estimate_b = m.peak_bytes;
    out->ops = m.ops;
    out->span = m.span;
    out->before_kb = (double)maxrss_kb();
    prs_frontier *f = NULL;
    double t0 = prs_mono_s();
    out->rc = prs_plan(p, &o, &f, &err);
    out->secs = prs_mono_s() - t0;
    out->after_kb = (double)maxrss_kb();
    if (out->rc) fprintf(stderr, "plan_memory: %s\n", err.msg);
    out->points = f ? prs_frontier_size(f) : 0;
    prs_frontier_free(f);
    prs_profile_free(p);
}

/* Run c in a child; 0 with *r, -1 when the child failed. */
static int run_child(const plan_case *c, result *r)
{
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        result res;
        run_case(c, &res);
        ssize_t w = write(fd[1], &res, sizeof res);
        _exit(w == (ssize_t)sizeof res && res.rc == 0 ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], r, sizeof *r);
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return got == (ssize_t)sizeof *r && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0, bad = 0;
    if (argc > 1 && !quick) {
        fprintf(stderr, "usage: plan_memory [--quick]\n");
        return 2;
    }
    printf("%-6s %-6s %-9s %-5s %-3s %-6s %-6s %-8s %-11s %-11s %-6s %s\n", "stages", "mbs", "ops",
           "model", "thr", "span", "points", "secs", "estimate_MB", "measured_MB", "ratio",
           "verdict");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const plan_case *c = &cases[i];
        if (quick && !c->quick) continue;
        result r;
        if (run_child(c, &r)) {
            fprintf(stderr, "plan_memory: case %zu failed\n", i);
            bad = 1;
            continue;
        }
        double measured = (r.after_kb - r.before_kb) * 1024.0, ratio = r.estimate_b / measured;
        const char *verdict = r.estimate_b < measured ? "UNDER" : ratio > 2 ? "LOOSE" : "OK";
        bad |= r.estimate_b < measured;
        printf("%-6d %-6d %-9ld %-5s %-3d %-6ld %-6zu %-8.2f %-11.1f %-11.1f %-6.2f %s\n",
               c->stages, c->microbatches, r.ops, prs_cost_model_name(c->model), c->threads, r.span,
               r.points, r.secs, r.estimate_b / 1e6, measured / 1e6, ratio, verdict);
        fflush(stdout);
    }
    return bad;
}
