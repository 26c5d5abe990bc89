/* perseus plot: SVG pictures of a planned frontier (with the baselines), of one plan's pipeline
 * timeline, and of the energy savings of Perseus and the baselines versus straggler slowdown.
 *
 * The drawing is in the viz library (include/perseus/plot.h), which takes plain numbers; this
 * file only gathers them: frontiers from a `perseus plan --out DIR` directory, baselines and
 * savings from the emulator (include/perseus/emulator.h). One option table serves the three
 * plots; options a plot does not use are rejected by name. Every SVG is written to FILE.tmp and
 * renamed into place, so a failed run never leaves a half-written picture behind.
 *
 * Each plot is parse (parse_args and the plot's own checks), run (load the frontier and profile,
 * plan or emulate: frontier_series, timeline_plan, prs_emulate) and draw (write_svg). The
 * pipeline options go through the shared parser (cli_pipeline.c). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perseus/numfmt.h"
#include "perseus/emulator.h"
#include "perseus/planner.h"
#include "perseus/plot.h"

static const char plot_usage[] =
    "usage: perseus plot frontier --frontier DIR [--profile FILE] --out FILE.svg\n"
    "       perseus plot timeline --frontier DIR --profile FILE\n"
    "                             (--index K | --time SEC | --baseline NAME) --out FILE.svg\n"
    "       perseus plot savings --profile FILE --pipelines N [--straggler SPEC]\n"
    "                            (--frontier DIR | --stages S --microbatches M --unit-time SEC\n"
    "                             --blocking-power W [--schedule NAME] [--cost-model MODEL])\n"
    "                            --out FILE.svg\n"
    "\n"
    "Draw a standalone SVG 1.1 picture (docs/plots.md).\n"
    "\n"
    "  frontier   iteration time (s) vs energy (J) of a frontier planned by 'perseus plan\n"
    "             --out DIR': each plan's predicted (cost model) and evaluated (profile)\n"
    "             figures, T_min (fastest plan) and T* (least evaluated energy) marked; with\n"
    "             --profile also the baselines: all-max, EnvPipe-style, the uniform-clock sweep\n"
    "             and its least-energy clock\n"
    "  timeline   one plan laid out in time: a row per GPU, a bar per computation coloured by\n"
    "             its SM clock, backward computations hatched, idle time grey\n"
    "  savings    energy saving of Perseus and the baselines against all-max, versus the\n"
    "             straggler's slowdown T'/T_min, for N data-parallel pipelines\n"
    "\n"
    "  --frontier DIR         frontier directory written by 'perseus plan --out DIR'\n"
    "  --profile FILE         stage profile CSV (the one the frontier was planned from)\n"
    "  --out FILE             SVG file to write\n"
    "  --title TEXT           replace the plot's title\n"
    "timeline:\n"
    "  --index K              frontier plan K (0 = slowest)\n"
    "  --time SEC             the least-energy plan whose evaluated time is <= SEC\n"
    "  --baseline NAME        a baseline plan instead: all-max, uniform (the least-energy\n"
    "                         uniform clock no slower than all-max, or than --time SEC), envpipe\n"
    "savings:\n"
    "  --pipelines N          data-parallel pipelines (one of them straggles)\n"
    "  --straggler SPEC       slowdown factors: numbers and START:STOP:STEP ranges, comma- or\n"
    "                         space-separated, repeatable (default 1.00:1.50:0.01)\n"
    "  --metric NAME          saving (default: whole job), saving-pp (one non-straggling\n"
    "                         pipeline), intrinsic or extrinsic (docs/emulator.md)\n"
    "  --variant NAME         emulation variant: paper (default: the artifact's recipe),\n"
    "                         exact, lookup (Perseus by the frontier lookup rule; baselines as\n"
    "                         exact)\n"
    "  --tp T                 tensor-parallel degree (default 1; percentages do not depend on it)\n"
    "  --stages S, --microbatches M, --unit-time SEC, --blocking-power W, --schedule NAME,\n"
    "  --virtual-stages V, --cost-model MODEL\n"
    "                         plan the pipeline first, as 'perseus plan' does (instead of\n"
    "                         --frontier DIR)\n"
    "  -h, --help             this help\n"
    "\n"
    "examples:\n"
    "  perseus plot frontier --frontier fr --profile prof.csv --out plots/frontier.svg\n"
    "  perseus plot timeline --frontier fr --profile prof.csv --index 0 --out plots/t0.svg\n"
    "  perseus plot savings --frontier fr --profile prof.csv --pipelines 8 --out plots/s.svg\n";

static int usage_error(const char *msg, const char *arg)
{
    return prs_cli_usage_error("plot", msg, arg);
}

/* Options: one table for all three plots. */
enum {
    OPT_FRONTIER,
    OPT_PROFILE,
    OPT_OUT,
    OPT_TITLE,
    OPT_INDEX,
    OPT_TIME,
    OPT_BASELINE,
    OPT_PIPELINES,
    OPT_STRAGGLER,
    OPT_METRIC,
    OPT_VARIANT,
    OPT_TP,
    OPT_STAGES,
    OPT_MICROBATCHES,
    OPT_UNIT_TIME,
    OPT_BLOCKING_POWER,
    OPT_SCHEDULE,
    OPT_VIRTUAL_STAGES,
    OPT_COST_MODEL,
    OPT_COUNT
};

static const struct option long_opts[] = {
    {"frontier", required_argument, 0, OPT_FRONTIER},
    {"profile", required_argument, 0, OPT_PROFILE},
    {"out", required_argument, 0, OPT_OUT},
    {"title", required_argument, 0, OPT_TITLE},
    {"index", required_argument, 0, OPT_INDEX},
    {"time", required_argument, 0, OPT_TIME},
    {"baseline", required_argument, 0, OPT_BASELINE},
    {"pipelines", required_argument, 0, OPT_PIPELINES},
    {"straggler", required_argument, 0, OPT_STRAGGLER},
    {"metric", required_argument, 0, OPT_METRIC},
    {"variant", required_argument, 0, OPT_VARIANT},
    {"tp", required_argument, 0, OPT_TP},
    {"stages", required_argument, 0, OPT_STAGES},
    {"microbatches", required_argument, 0, OPT_MICROBATCHES},
    {"unit-time", required_argument, 0, OPT_UNIT_TIME},
    {"blocking-power", required_argument, 0, OPT_BLOCKING_POWER},
    {"schedule", required_argument, 0, OPT_SCHEDULE},
    {"virtual-stages", required_argument, 0, OPT_VIRTUAL_STAGES},
    {"cost-model", required_argument, 0, OPT_COST_MODEL},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};

#define BIT(o) (1u << (o))
#define PLAN_OPTS                                                                                  \
    (BIT(OPT_STAGES) | BIT(OPT_MICROBATCHES) | BIT(OPT_UNIT_TIME) | BIT(OPT_BLOCKING_POWER) |      \
     BIT(OPT_SCHEDULE) | BIT(OPT_VIRTUAL_STAGES) | BIT(OPT_COST_MODEL))
#define COMMON_OPTS (BIT(OPT_FRONTIER) | BIT(OPT_PROFILE) | BIT(OPT_OUT) | BIT(OPT_TITLE))

typedef enum metric { METRIC_SAVING, METRIC_SAVING_PP, METRIC_INTRINSIC, METRIC_EXTRINSIC } metric;

typedef struct plot_args {
    unsigned seen; /* BIT(OPT_...) of every option given */
    const char *frontier_dir, *profile_path, *out_path, *title, *baseline;
    long index;
    double time_s;
    int pipelines, tp;
    double *stragglers;
    size_t nstragglers;
    metric metric;
    prs_emu_variant variant;
    prs_cli_pipeline pl; /* the pipeline options (savings) */
} plot_args;

static int parse_number(const char *opt, const char *v, double min, int strict, double *out)
{
    return prs_cli_number("plot", opt, v, min, strict, out);
}

/* Parse argv (argv[0] is the plot kind) into a; allowed: the options this plot takes. Returns
 * 0, or the exit status (2, or 0 with help printed: *done set). */
static int parse_args(int argc, char **argv, unsigned allowed, plot_args *a, int *done)
{
    memset(a, 0, sizeof *a);
    a->tp = 1;
    a->index = -1;
    prs_cli_pipeline_init(&a->pl);
    *done = 0;
    prs_error err = {0, ""};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(plot_usage, stdout);
            *done = 1;
            return 0;
        }
        if (c == ':') return usage_error("missing value for", argv[optind - 1]);
        if (c < 0 || c >= OPT_COUNT)
            return prs_cli_unknown_option("plot", argv[optind - 1], long_opts);
        if (!(allowed & BIT(c))) {
            fprintf(stderr, "perseus plot %s: option '--%s' does not apply to this plot\n", argv[0],
                    long_opts[c].name);
            return 2;
        }
        a->seen |= BIT(c);
        switch (c) {
        case OPT_FRONTIER:
            a->frontier_dir = optarg;
            break;
        case OPT_PROFILE:
            a->profile_path = optarg;
            break;
        case OPT_OUT:
            a->out_path = optarg;
            break;
        case OPT_TITLE:
            a->title = optarg;
            break;
        case OPT_INDEX:
            if (prs_num_parse_long(optarg, &a->index) || a->index < 0)
                return usage_error("--index: expected an integer >= 0, got", optarg);
            break;
        case OPT_TIME:
            if (parse_number("--time", optarg, 0, 1, &a->time_s)) return 2;
            break;
        case OPT_BASELINE:
            if (strcmp(optarg, "all-max") != 0 && strcmp(optarg, "uniform") != 0 &&
                strcmp(optarg, "envpipe") != 0)
                return usage_error("--baseline: expected all-max, uniform or envpipe, got", optarg);
            a->baseline = optarg;
            break;
        case OPT_PIPELINES:
            if (prs_cli_positive_int("plot", "--pipelines", optarg, &a->pipelines)) return 2;
            break;
        case OPT_TP:
            if (prs_cli_positive_int("plot", "--tp", optarg, &a->tp)) return 2;
            break;
        case OPT_STRAGGLER:
            if (prs_straggler_parse(optarg, &a->stragglers, &a->nstragglers, &err)) {
                fprintf(stderr, "perseus plot: --straggler: %s\n", err.msg);
                return 2;
            }
            break;
        case OPT_METRIC:
            if (strcmp(optarg, "saving") == 0)
                a->metric = METRIC_SAVING;
            else if (strcmp(optarg, "saving-pp") == 0)
                a->metric = METRIC_SAVING_PP;
            else if (strcmp(optarg, "intrinsic") == 0)
                a->metric = METRIC_INTRINSIC;
            else if (strcmp(optarg, "extrinsic") == 0)
                a->metric = METRIC_EXTRINSIC;
            else
                return usage_error(
                    "--metric: expected saving, saving-pp, intrinsic or extrinsic, got", optarg);
            break;
        case OPT_VARIANT: {
            int v = 0;
            while (v < PRS_EMU_NVARIANTS && strcmp(optarg, prs_emu_variant_name(v)) != 0)
                v++;
            if (v == PRS_EMU_NVARIANTS)
                return usage_error("--variant: expected paper, exact or lookup, got", optarg);
            a->variant = (prs_emu_variant)v;
            break;
        }
        default: /* the pipeline options */
            if (prs_cli_pipeline_option("plot", long_opts[c].name, optarg, &a->pl)) return 2;
            break;
        }
    }
    if (optind < argc) return usage_error("unexpected argument", argv[optind]);
    if (!a->out_path) return usage_error("missing required option", "--out");
    return 0;
}

/* ---- shared helpers --------------------------------------------------------------------- */

static int load_frontier(const char *dir, prs_frontier **f)
{
    prs_error err = {0, ""};
    if (prs_frontier_load(dir, f, &err)) {
        fprintf(stderr, "perseus plot: %s\n", err.msg);
        return 2;
    }
    return 0;
}

/* Load a profile and check it covers the pipeline's model chunks. */
static int load_profile(const char *path, const prs_pipeline *pipe, prs_profile **p)
{
    prs_error err = {0, ""};
    if (prs_profile_load(path, p, &err) ||
        (pipe && prs_profile_check_stages(*p, prs_pipeline_chunks(pipe), &err))) {
        fprintf(stderr, "perseus plot: %s\n", err.msg);
        prs_profile_free(*p);
        *p = NULL;
        return 2;
    }
    return 0;
}

static int lib_error(const prs_error *err, int rc)
{
    fprintf(stderr, "perseus plot: %s\n", err->msg);
    return rc == PRS_EINVAL || rc == PRS_EPARSE || rc == PRS_ERANGE ? 2 : 1;
}

typedef int (*draw_fn)(FILE *out, const void *spec, prs_error *err);

static int draw_frontier(FILE *out, const void *spec, prs_error *err)
{
    return prs_plot_frontier(out, spec, err);
}

static int draw_timeline(FILE *out, const void *spec, prs_error *err)
{
    return prs_plot_timeline(out, spec, err);
}

static int draw_savings(FILE *out, const void *spec, prs_error *err)
{
    return prs_plot_savings(out, spec, err);
}

/* Draw into path.tmp, then rename it to path. */
static int write_svg(const char *path, draw_fn draw, const void *spec)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp) {
        fputs("perseus plot: out of memory\n", stderr);
        return 1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    if (prs_cli_make_parent("plot", path)) {
        free(tmp);
        return 1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "perseus plot: cannot write '%s': %s\n", path, strerror(errno));
        free(tmp);
        return 1;
    }
    prs_error err = {0, ""};
    int rc = draw(f, spec, &err);
    if (fclose(f) != 0 && rc == 0) rc = prs_error_set(&err, PRS_EIO, "write failed");
    if (rc == 0 && rename(tmp, path) != 0)
        rc = prs_error_set(&err, PRS_EIO, "cannot rename to '%s': %s", path, strerror(errno));
    if (rc) {
        remove(tmp);
        fprintf(stderr, "perseus plot: %s: %s\n", path, err.msg);
    }
    free(tmp);
    return rc == 0 ? 0 : rc == PRS_EINVAL ? 2 : 1;
}

static void describe_pipeline(const prs_pipeline *pipe, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%d stages, %d microbatches, %s", pipe->stages,
                                  pipe->microbatches, prs_schedule_name(pipe->schedule));
    if (pipe->virtual_stages > 1 && len < n)
        len += (size_t)snprintf(buf + len, n - len, " (%d virtual stages)", pipe->virtual_stages);
    if (len < n) {
        char unit[PRS_NUMFMT_MAX], power[PRS_NUMFMT_MAX];
        snprintf(buf + len, n - len, "; unit %s s, blocking power %s W",
                 prs_num_fmt_double(unit, sizeof unit, pipe->unit_time_s),
                 prs_num_fmt_double(power, sizeof power, pipe->blocking_power_w));
    }
}

/* ---- frontier --------------------------------------------------------------------------- */

/* Evaluated time and energy of a baseline plan. */
static int eval_baseline(const prs_profile *profile, const prs_pipeline *pipe, int *clocks,
                         int which, prs_plot_point *pt, prs_error *err)
{
    int rc = which == 0 ? prs_baseline_allmax(profile, pipe, clocks, err)
                        : prs_baseline_envpipe(profile, pipe, clocks, err);
    if (rc) return rc;
    return prs_evaluate_plan(profile, pipe, clocks, &pt->x, &pt->y, err);
}

/* Everything the frontier plot owns. */
typedef struct frontier_data {
    prs_frontier *f;
    prs_profile *profile;
    double *v; /* predicted times, energies, evaluated times, energies: n each */
    int *clocks;
    prs_uniform_point *sweep;
    size_t nsweep;
    double *sv; /* the sweep's times and energies drawn */
    prs_plot_point baselines[3];
    prs_plot_series curve;
    char subtitle[256], sweep_label[96], uniform_label[96];
    prs_frontier_plot p;
} frontier_data;

/* Order of (planned time, predicted energy) pairs: slowest first. */
static int by_time_desc(const void *x, const void *y)
{
    const double *a = x, *b = y;
    return a[0] > b[0] ? -1 : a[0] < b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/* The predicted series in place (times v[0..n), energies v[n..2n)): slowest first, one point per
 * planned time, its length into *m. A clean frontier is ordered by evaluated time, and with hull
 * an iteration can give two of its plans (docs/planner.md, 'From the relaxed plan to clocks'),
 * both at the iteration's planned time and predicted energy. 0, or 1 when out of memory. */
static int planned_series(double *v, size_t n, size_t *m)
{
    double *pair = malloc(sizeof *pair * (2 * n + 1));
    if (!pair) return 1;
    for (size_t k = 0; k < n; k++)
        pair[2 * k] = v[k], pair[2 * k + 1] = v[n + k];
    qsort(pair, n, 2 * sizeof *pair, by_time_desc);
    *m = 0;
    for (size_t k = 0; k < n; k++)
        if (*m == 0 || pair[2 * k] != v[*m - 1]) {
            v[*m] = pair[2 * k];
            v[n + (*m)++] = pair[2 * k + 1];
        }
    free(pair);
    return 0;
}

/* The frontier's plans as the two series, T_min and T*; 0 or the exit status. */
static int frontier_series(const plot_args *a, frontier_data *d)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(d->f);
    size_t n = prs_frontier_size(d->f);
    double *v = d->v = malloc(sizeof *v * (4 * n + 1));
    if (!v) {
        fputs("perseus plot: out of memory\n", stderr);
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "perseus plot: %s: the frontier is empty\n", a->frontier_dir);
        return 2;
    }
    double tmin = INFINITY, tstar = 0, emin = INFINITY;
    for (size_t k = 0; k < n; k++) {
        const prs_frontier_point *pt = prs_frontier_point_at(d->f, k);
        v[k] = pt->time_s;
        v[n + k] = pt->energy_j;
        v[2 * n + k] = pt->eval_time_s;
        v[3 * n + k] = pt->eval_energy_j;
        if (pt->eval_time_s < tmin) tmin = pt->eval_time_s;
        if (pt->eval_energy_j < emin) {
            emin = pt->eval_energy_j;
            tstar = pt->eval_time_s;
        }
    }
    size_t np = 0;
    if (planned_series(v, n, &np)) {
        fputs("perseus plot: out of memory\n", stderr);
        return 1;
    }
    describe_pipeline(pipe, d->subtitle, sizeof d->subtitle);
    size_t sl = strlen(d->subtitle);
    snprintf(d->subtitle + sl, sizeof d->subtitle - sl, "; %s cost model, %zu plans",
             prs_cost_model_name(prs_frontier_cost_model(d->f)), n);
    d->p = (prs_frontier_plot){
        a->title ? a->title : "Iteration time-energy frontier",
        d->subtitle,
        {"Perseus: predicted (cost model)", v, v + n, np},
        {"Perseus: evaluated (profile)", v + 2 * n, v + 3 * n, n},
        NULL,
        0,
        NULL,
        0,
        tmin,
        tstar,
    };
    return 0;
}

/* The uniform-clock sweep over the frontier's time span (and a little beyond) as a curve, and
 * its least-energy clock no slower than the frontier's slowest plan (beyond it Perseus has no
 * plan to compare) as a baseline point; *nb counts the baselines. 0 or the exit status. */
static int frontier_sweep(frontier_data *d, size_t *nb)
{
    size_t n = prs_frontier_size(d->f), nsweep = d->nsweep;
    const prs_uniform_point *sweep = d->sweep;
    double slowest = 0;
    for (size_t k = 0; k < n; k++)
        slowest = fmax(slowest, d->v[2 * n + k]);
    size_t kbest = 0;
    int have_best = prs_uniform_pick(sweep, nsweep, slowest, &kbest) == 0;
    double *sv = d->sv = malloc(sizeof *sv * (2 * nsweep + 1));
    if (!sv) {
        fputs("perseus plot: out of memory\n", stderr);
        return 1;
    }
    size_t ns = 0;
    int fmin = 0, fmax = 0;
    for (size_t i = 0; i < nsweep; i++) {
        if (sweep[i].time_s > slowest * 1.03) continue;
        sv[ns] = sweep[i].time_s;
        sv[nsweep + ns] = sweep[i].energy_j;
        ns++;
        if (!fmin || sweep[i].freq_mhz < fmin) fmin = sweep[i].freq_mhz;
        if (sweep[i].freq_mhz > fmax) fmax = sweep[i].freq_mhz;
    }
    snprintf(d->sweep_label, sizeof d->sweep_label, "uniform clock, %d-%d MHz", fmin, fmax);
    d->curve = (prs_plot_series){d->sweep_label, sv, sv + nsweep, ns};
    d->p.curves = &d->curve;
    d->p.ncurves = ns ? 1 : 0;
    if (have_best) {
        const prs_uniform_point *u = &sweep[kbest];
        snprintf(d->uniform_label, sizeof d->uniform_label, "uniform %d MHz", u->freq_mhz);
        d->baselines[(*nb)++] = (prs_plot_point){d->uniform_label, u->time_s, u->energy_j};
    }
    return 0;
}

/* With --profile: all-max, EnvPipe-style and the uniform-clock sweep. 0 or the exit status. */
static int frontier_baselines(const plot_args *a, frontier_data *d)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(d->f);
    prs_error err = {0, ""};
    int rc = load_profile(a->profile_path, pipe, &d->profile);
    if (rc) return rc;
    d->clocks = malloc(sizeof *d->clocks * (size_t)(pipe->stages * prs_ops_per_stage(pipe)));
    if (!d->clocks) {
        fputs("perseus plot: out of memory\n", stderr);
        return 1;
    }
    d->baselines[0].label = "all-max";
    d->baselines[1].label = "EnvPipe-style";
    if ((rc = eval_baseline(d->profile, pipe, d->clocks, 0, &d->baselines[0], &err)) ||
        (rc = eval_baseline(d->profile, pipe, d->clocks, 1, &d->baselines[1], &err)) ||
        (rc = prs_uniform_sweep(d->profile, pipe, &d->sweep, &d->nsweep, &err)))
        return lib_error(&err, rc);
    size_t nb = 2;
    if ((rc = frontier_sweep(d, &nb))) return rc;
    d->p.baselines = d->baselines;
    d->p.nbaselines = nb;
    return 0;
}

static int plot_frontier(int argc, char **argv)
{
    plot_args a;
    int done = 0;
    int rc = parse_args(argc, argv, COMMON_OPTS, &a, &done);
    if (rc || done) return rc;
    if (!a.frontier_dir) return usage_error("missing required option", "--frontier");
    frontier_data d;
    memset(&d, 0, sizeof d);
    if ((rc = load_frontier(a.frontier_dir, &d.f))) return rc;
    rc = frontier_series(&a, &d);
    if (!rc && a.profile_path) rc = frontier_baselines(&a, &d);
    if (!rc) rc = write_svg(a.out_path, draw_frontier, &d.p);
    free(d.sv);
    free(d.sweep);
    free(d.clocks);
    free(d.v);
    prs_profile_free(d.profile);
    prs_frontier_free(d.f);
    return rc;
}

/* ---- timeline --------------------------------------------------------------------------- */

/* The clocks of the plan a selects (a baseline, or a frontier point) and the plot's title; 0 or
 * the exit status (message printed). */
static int timeline_plan(const plot_args *a, const prs_frontier *f, const prs_profile *profile,
                         int *clocks, char *title, size_t title_len)
{
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    prs_error err = {0, ""};
    size_t n = prs_frontier_size(f), k = 0;
    int rc;
    if (a->baseline) {
        if (strcmp(a->baseline, "all-max") == 0) {
            rc = prs_baseline_allmax(profile, pipe, clocks, &err);
            snprintf(title, title_len, "Pipeline timeline: all-max baseline");
        } else if (strcmp(a->baseline, "envpipe") == 0) {
            rc = prs_baseline_envpipe(profile, pipe, clocks, &err);
            snprintf(title, title_len, "Pipeline timeline: EnvPipe-style baseline");
        } else {
            prs_uniform_point up;
            rc = prs_baseline_uniform(profile, pipe, a->time_s, clocks, &up, &err);
            snprintf(title, title_len, "Pipeline timeline: uniform clock %d MHz", up.freq_mhz);
        }
        return rc ? lib_error(&err, rc) : 0;
    }
    if (a->index >= 0) {
        if ((size_t)a->index >= n) {
            fprintf(stderr, "perseus plot: --index: expected 0..%zu, got '%ld'\n", n ? n - 1 : 0,
                    a->index);
            return 2;
        }
        k = (size_t)a->index;
    } else if (prs_frontier_find_time(f, a->time_s, &k, &err)) {
        fprintf(stderr, "perseus plot: --time: %s\n", err.msg);
        return 2;
    }
    if ((rc = prs_frontier_plan(f, k, clocks, &err))) return lib_error(&err, rc);
    snprintf(title, title_len, "Pipeline timeline: plan %zu of %zu (0 = slowest)", k, n);
    return 0;
}

/* Lay the plan out in time and draw it (ops: one per computation). */
static int timeline_draw(const plot_args *a, const prs_pipeline *pipe, const prs_profile *profile,
                         const int *clocks, prs_timeline_op *ops, const char *title)
{
    prs_error err = {0, ""};
    double time_s, energy_j;
    int rc = prs_plan_timeline(profile, pipe, clocks, ops, &time_s, &energy_j, &err);
    if (rc) return lib_error(&err, rc);
    /* Colour scale: the clocks profiled for the model chunks this pipeline runs. */
    int chunks = prs_pipeline_chunks(pipe), fmin = 0, fmax = 0;
    const prs_profile_row *rows = prs_profile_rows(profile);
    for (size_t i = 0; i < prs_profile_nrows(profile); i++) {
        if (rows[i].stage >= chunks) continue;
        if (!fmin || rows[i].freq_mhz < fmin) fmin = rows[i].freq_mhz;
        if (rows[i].freq_mhz > fmax) fmax = rows[i].freq_mhz;
    }
    char pipe_text[160], subtitle[256];
    describe_pipeline(pipe, pipe_text, sizeof pipe_text);
    snprintf(subtitle, sizeof subtitle, "iteration %.4g s, %.6g J (evaluated); %s", time_s,
             energy_j, pipe_text);
    size_t nops = (size_t)pipe->stages * (size_t)prs_ops_per_stage(pipe);
    prs_timeline_plot p = {
        a->title ? a->title : title, subtitle, ops, nops, pipe->stages, time_s, fmin, fmax};
    return write_svg(a->out_path, draw_timeline, &p);
}

static int plot_timeline(int argc, char **argv)
{
    plot_args a;
    int done = 0;
    int rc = parse_args(
        argc, argv, COMMON_OPTS | BIT(OPT_INDEX) | BIT(OPT_TIME) | BIT(OPT_BASELINE), &a, &done);
    if (rc || done) return rc;
    if (!a.frontier_dir) return usage_error("missing required option", "--frontier");
    if (!a.profile_path) return usage_error("missing required option", "--profile");
    int given = (a.index >= 0) + (a.time_s > 0 && !a.baseline) + (a.baseline != NULL);
    if (given != 1)
        return usage_error("give exactly one of --index K, --time SEC or --baseline NAME", NULL);
    if (a.baseline && a.time_s > 0 && strcmp(a.baseline, "uniform") != 0)
        return usage_error("--time goes with --baseline uniform only, not", a.baseline);
    prs_frontier *f = NULL;
    if ((rc = load_frontier(a.frontier_dir, &f))) return rc;
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    prs_profile *profile = NULL;
    int *clocks = NULL;
    prs_timeline_op *ops = NULL;
    char title[128];
    if ((rc = load_profile(a.profile_path, pipe, &profile))) goto out;
    size_t nops = (size_t)pipe->stages * (size_t)prs_ops_per_stage(pipe);
    clocks = malloc(sizeof *clocks * nops);
    ops = malloc(sizeof *ops * nops);
    if (!clocks || !ops) {
        fputs("perseus plot: out of memory\n", stderr);
        rc = 1;
        goto out;
    }
    rc = timeline_plan(&a, f, profile, clocks, title, sizeof title);
    if (!rc) rc = timeline_draw(&a, pipe, profile, clocks, ops, title);
out:
    free(ops);
    free(clocks);
    prs_profile_free(profile);
    prs_frontier_free(f);
    return rc;
}

/* ---- savings ---------------------------------------------------------------------------- */

static double metric_of(const prs_emu_metrics *m, metric which)
{
    switch (which) {
    case METRIC_SAVING_PP:
        return m->saving_pp;
    case METRIC_INTRINSIC:
        return m->intrinsic_saving;
    case METRIC_EXTRINSIC:
        return m->extrinsic_saving;
    default:
        return m->saving;
    }
}

/* The savings plot's checks beyond the option values; 0 or the exit status. */
static int savings_check(plot_args *a)
{
    prs_error err = {0, ""};
    const char *missing = !a->profile_path ? "--profile" : !a->pipelines ? "--pipelines" : NULL;
    if (a->frontier_dir && (a->seen & PLAN_OPTS))
        return usage_error("give --frontier DIR or the pipeline options, not both", NULL);
    if (!missing && !a->frontier_dir)
        missing = prs_cli_pipeline_missing(&a->pl, PRS_CLI_PIPELINE_REQUIRED);
    if (missing) return usage_error("missing required option", missing);
    if (a->nstragglers == 0 &&
        prs_straggler_parse("1.00:1.50:0.01", &a->stragglers, &a->nstragglers, &err))
        return lib_error(&err, PRS_ENOMEM);
    return 0;
}

/* One series per strategy of the emulation (xy: their points); draw them. */
static int savings_draw(const plot_args *a, const prs_emulation *emu, double *xy)
{
    static const prs_emu_strategy order[] = {PRS_EMU_PERSEUS, PRS_EMU_ENVPIPE, PRS_EMU_UNIFORM,
                                             PRS_EMU_ALLMAX};
    static const char *const labels[] = {"Perseus", "EnvPipe-style", "uniform clock",
                                         "all-max (reference)"};
    prs_plot_series series[4];
    size_t nseries = 0;
    for (size_t i = 0; i < 4; i++) {
        const prs_emu_summary *sum = prs_emulation_get(emu, a->variant, order[i]);
        if (!sum && a->variant == PRS_EMU_LOOKUP)
            sum = prs_emulation_get(emu, PRS_EMU_EXACT, order[i]);
        if (!sum) continue;
        double *x = xy + 2 * i * (a->nstragglers + 1), *y = x + a->nstragglers + 1;
        for (size_t r = 0; r < sum->nrows; r++) {
            x[r] = sum->rows[r].s;
            y[r] = metric_of(&sum->rows[r], a->metric);
        }
        series[nseries++] = (prs_plot_series){labels[i], x, y, sum->nrows};
    }
    static const char *const ylabels[] = {
        "Energy saving of the job (%)", "Energy saving per pipeline (%)",
        "Intrinsic energy saving (%)", "Extrinsic energy saving (%)"};
    char subtitle[256], pipe_text[160];
    const prs_pipeline *ep = prs_frontier_pipeline(prs_emulation_frontier(emu));
    describe_pipeline(ep, pipe_text, sizeof pipe_text);
    snprintf(subtitle, sizeof subtitle, "%d pipelines of %s; %s variant, against all-max",
             a->pipelines, pipe_text, prs_emu_variant_name(a->variant));
    prs_savings_plot p = {a->title, subtitle, ylabels[a->metric], series, nseries, NULL};
    return write_svg(a->out_path, draw_savings, &p);
}

static int plot_savings(int argc, char **argv)
{
    plot_args a;
    int done = 0;
    int rc = parse_args(argc, argv,
                        COMMON_OPTS | PLAN_OPTS | BIT(OPT_PIPELINES) | BIT(OPT_STRAGGLER) |
                            BIT(OPT_METRIC) | BIT(OPT_VARIANT) | BIT(OPT_TP),
                        &a, &done);
    prs_frontier *f = NULL;
    prs_profile *profile = NULL;
    prs_emulation *emu = NULL;
    double *xy = NULL;
    prs_error err = {0, ""};
    if (rc || done || (rc = savings_check(&a))) goto out;
    if (a.frontier_dir && (rc = load_frontier(a.frontier_dir, &f))) goto out;
    if (!a.frontier_dir && prs_pipeline_check(&a.pl.plan.pipe, &err)) {
        rc = usage_error(err.msg, NULL);
        goto out;
    }
    const prs_pipeline *pipe = f ? prs_frontier_pipeline(f) : &a.pl.plan.pipe;
    if ((rc = load_profile(a.profile_path, pipe, &profile))) goto out;
    prs_emulate_opts eo = {a.pl.plan, a.pipelines, a.tp, a.stragglers, a.nstragglers};
    rc = f ? prs_emulate_frontier(profile, f, &eo, &emu, &err)
           : prs_emulate(profile, &eo, &emu, &err);
    if (rc) {
        rc = lib_error(&err, rc);
        goto out;
    }
    xy = malloc(sizeof *xy * 2 * 4 * (a.nstragglers + 1));
    if (!xy) {
        fputs("perseus plot: out of memory\n", stderr);
        rc = 1;
        goto out;
    }
    rc = savings_draw(&a, emu, xy);
out:
    free(xy);
    free(a.stragglers);
    prs_emulation_free(emu);
    prs_profile_free(profile);
    prs_frontier_free(f);
    return rc;
}

int prs_cmd_plot(int argc, char **argv)
{
    if (argc < 2) return usage_error("expected a plot: frontier, timeline or savings", NULL);
    const char *kind = argv[1];
    if (strcmp(kind, "--help") == 0 || strcmp(kind, "-h") == 0) {
        fputs(plot_usage, stdout);
        return 0;
    }
    if (strcmp(kind, "frontier") == 0) return plot_frontier(argc - 1, argv + 1);
    if (strcmp(kind, "timeline") == 0) return plot_timeline(argc - 1, argv + 1);
    if (strcmp(kind, "savings") == 0) return plot_savings(argc - 1, argv + 1);
    return usage_error("unknown plot (expected frontier, timeline or savings)", kind);
}
