/* bench_plan: wall time and peak memory of prs_plan on real stage profiles.
 *
 * For every *.csv stage profile in a directory and every requested microbatch count M and cost
 * model, one "case" runs in a forked child process: the child loads the profile once, calls
 * prs_plan N times with CLOCK_MONOTONIC read just before and after each call (loading, freeing
 * and everything else is outside the timed region), sends the N times and the frontier size to
 * the parent through a pipe, and exits. The parent reaps it with wait4(), whose rusage belongs to
 * that child alone, so ru_maxrss is the peak RSS of exactly one case (getrusage(RUSAGE_CHILDREN)
 * would be the maximum over every child reaped so far). The child starts from the parent's small
 * resident set (fork copies it), so the figure is an honest upper bound for a process that plans
 * that case and nothing else.
 *
 * The report puts the targets from the planner-performance issue next to the figures (GPT-3
 * M=12 median < 40 ms, GPT-3 M=96 median < 2 s, peak RSS < 200 MB everywhere) with a PASS/MISS
 * verdict. It is a report, not a test: a missed target still exits 0; exit 1 means the benchmark
 * itself could not run (no profiles, a planner error, a crashed child), exit 2 a bad argument. */
/* glibc declares wait4() and getloadavg() only with _DEFAULT_SOURCE (the build sets just
 * _POSIX_C_SOURCE); _DEFAULT_SOURCE keeps the POSIX.1-2008 interfaces too. */
#define _DEFAULT_SOURCE /* NOLINT(bugprone-reserved-identifier) */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perseus/error.h"
#include "perseus/planner.h"
#include "perseus/profile.h"
#include "perseus/synth.h"

#define PROG "bench_plan"
#define MAX_MICROBATCH_COUNTS 64
#define MAX_MICROBATCHES 100000
#define MAX_STAGES 100000
#define MAX_RUNS 10000
#define MIN_RUNS 5
#define DEFAULT_SUBDIR "data/sosp24/stage_profile"

/* Targets from the issue. Time targets apply to profiles whose name starts with "gpt3". */
#define TARGET_GPT3_M12_S 0.040
#define TARGET_GPT3_M96_S 2.0
#define TARGET_RSS_BYTES 200e6 /* 200 MB, 1 MB = 10^6 bytes */

typedef struct bench_opts {
    const char *profiles_dir;
    const prs_gpu_preset *synth; /* --synth: plan this GPU model's synthetic profile instead */
    int microbatches[MAX_MICROBATCH_COUNTS];
    int n_microbatches;
    int stages;
    double unit_time_s;
    double blocking_power_w;
    int models[2];
    int n_models;
    int runs;
    int quick;
    int csv;
    int stats;              /* --stats: what each case's planning run did */
    int threads;            /* prs_plan_opts.threads (0: one per processor) */
    prs_polish_kind polish; /* prs_plan_opts.polish (default auto) */
} bench_opts;

/* What a child sends back before its 2N doubles (wall times of prs_plan in seconds, then the
 * CPU times of the process over the same calls, every thread's). */
typedef struct child_report {
    int rc;                          /* 0, or the PRS_E* code of the failing load or plan */
    long points;                     /* frontier size of the first run */
    long warnings;                   /* planner warnings over all runs */
    char msg[PRS_ERRMSG_MAX];        /* error message when rc != 0 */
    char first_warn[PRS_ERRMSG_MAX]; /* first planner warning, if any */
    prs_plan_stats stats;            /* what the first run did */
} child_report;

typedef struct case_result {
    int ok;
    long points;
    double median_s, min_s, max_s;
    double cpu_median_s; /* CPU time of the process (all threads) over prs_plan, median */
    double peak_rss_bytes;
    prs_plan_stats stats;
} case_result;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "\n"
            "Plan every stage profile (*.csv) in a directory for each microbatch count and cost\n"
            "model, each case in its own child process, and report the number of frontier\n"
            "points, the median/min/max wall time of prs_plan over the runs and the case's peak\n"
            "RSS, next to the targets (GPT-3 M=12 < 40 ms, GPT-3 M=96 < 2 s, RSS < 200 MB).\n"
            "\n"
            "  --profiles DIR        profile directory (default: $PRS_SHARED_DIR/" DEFAULT_SUBDIR
            "\n"
            "                        if PRS_SHARED_DIR is set, else ../shared/" DEFAULT_SUBDIR ")\n"
            "  --synth GPU           instead of a directory, the synthetic profile of a GPU\n"
            "                        preset (a100, a40, h100; perseus synth's defaults), one\n"
            "                        stage per pipeline stage\n"
            "  --microbatches LIST   comma-separated microbatch counts (default 12,24,48,96)\n"
            "  --stages S            pipeline stages (default 8)\n"
            "  --unit-time SECONDS   planner time quantum (default 0.001)\n"
            "  --blocking-power W    GPU power while blocked (default 83.64)\n"
            "  --cost-model MODEL    exp, hull or both (default exp)\n"
            "  --threads N           planner threads (prs_plan_opts.threads; default 0: one\n"
            "                        per processor, at most 16)\n"
            "  --polish KIND         plans polished (prs_plan_opts.polish: auto, the default,\n"
            "                        none, runs or all)\n"
            "  --runs N              timed plans per case (default 5, at least %d)\n"
            "  --quick               allow fewer than %d runs; default 1 run\n"
            "  --csv                 machine-readable CSV output\n"
            "  --stats               also what each case's first planning run did (steps,\n"
            "                        cuts, max-flow searches, evaluations, reclaimings):\n"
            "                        a comment line per case, or more CSV columns\n"
            "  -h, --help            show this help\n"
            "\n"
            "With --cost-model both, a line after each pair of cases gives hull's median over\n"
            "exp's (text output only).\n"
            "\n"
            "Exit status: 0 when every case ran (even if a target is missed), 1 on a runtime\n"
            "error, 2 on a bad argument.\n",
            MIN_RUNS, MIN_RUNS);
}

/* One-line usage error on stderr; returns exit status 2. */
static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, PROG ": %s\n", msg);
    return 2;
}

/* Strict integer in [lo, hi]: the whole string, decimal. 0 or -1. */
static int parse_int_range(const char *s, int lo, int hi, int *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* Strict finite double: the whole string. 0 or -1. */
static int parse_finite(const char *s, double *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int parse_microbatches(const char *arg, bench_opts *o)
{
    char copy[1024];
    if (strlen(arg) >= sizeof copy) return bad("--microbatches: list too long: '%.40s...'", arg);
    memcpy(copy, arg, strlen(arg) + 1);
    int n = 0;
    char *item = copy;
    for (;;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        if (n == MAX_MICROBATCH_COUNTS)
            return bad("--microbatches: more than %d values", MAX_MICROBATCH_COUNTS);
        if (parse_int_range(item, 1, MAX_MICROBATCHES, &o->microbatches[n]) != 0)
            return bad("--microbatches: expected integers from 1 to %d separated by commas, "
                       "got '%s'",
                       MAX_MICROBATCHES, arg);
        n++;
        if (!comma) break;
        item = comma + 1;
    }
    o->n_microbatches = n;
    return 0;
}

/* Parse argv into o. 0, -1 for --help (usage printed), or exit status 2 (message printed). */
enum {
    OPT_PROFILES = 256,
    OPT_MICROBATCHES,
    OPT_STAGES,
    OPT_UNIT,
    OPT_BLOCK,
    OPT_MODEL,
    OPT_RUNS,
    OPT_THREADS,
    OPT_QUICK,
    OPT_CSV,
    OPT_STATS,
    OPT_SYNTH,
    OPT_POLISH
};
static const struct option longopts[] = {
    {"profiles", required_argument, NULL, OPT_PROFILES},
    {"synth", required_argument, NULL, OPT_SYNTH},
    {"microbatches", required_argument, NULL, OPT_MICROBATCHES},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"unit-time", required_argument, NULL, OPT_UNIT},
    {"blocking-power", required_argument, NULL, OPT_BLOCK},
    {"cost-model", required_argument, NULL, OPT_MODEL},
    {"runs", required_argument, NULL, OPT_RUNS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"polish", required_argument, NULL, OPT_POLISH},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"csv", no_argument, NULL, OPT_CSV},
    {"stats", no_argument, NULL, OPT_STATS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void set_defaults(bench_opts *o)
{
    static const int default_microbatches[] = {12, 24, 48, 96};
    memset(o, 0, sizeof *o);
    for (int k = 0; k < 4; k++)
        o->microbatches[k] = default_microbatches[k];
    o->n_microbatches = 4;
    o->stages = 8;
    o->unit_time_s = 0.001;
    o->blocking_power_w = 83.64;
    o->models[0] = PRS_COST_EXP;
    o->n_models = 1;
    o->runs = 0; /* 0: not given */
}

static int parse_model(const char *arg, bench_opts *o)
{
    if (strcmp(arg, "exp") == 0) {
        o->models[0] = PRS_COST_EXP;
        o->n_models = 1;
    } else if (strcmp(arg, "hull") == 0) {
        o->models[0] = PRS_COST_HULL;
        o->n_models = 1;
    } else if (strcmp(arg, "both") == 0) {
        o->models[0] = PRS_COST_EXP;
        o->models[1] = PRS_COST_HULL;
        o->n_models = 2;
    } else {
        return bad("--cost-model: expected exp, hull or both, got '%s'", arg);
    }
    return 0;
}

/* A numeric option's value: 0, or bad()'s status. */
static int parse_number_opt(int c, const char *arg, bench_opts *o)
{
    switch (c) {
    case OPT_STAGES:
        if (parse_int_range(arg, 1, MAX_STAGES, &o->stages) != 0)
            return bad("--stages: expected an integer from 1 to %d, got '%s'", MAX_STAGES, arg);
        return 0;
    case OPT_UNIT:
        if (parse_finite(arg, &o->unit_time_s) != 0 || !(o->unit_time_s > 0))
            return bad("--unit-time: expected a positive number of seconds, got '%s'", arg);
        return 0;
    case OPT_BLOCK:
        if (parse_finite(arg, &o->blocking_power_w) != 0 || o->blocking_power_w < 0)
            return bad("--blocking-power: expected a non-negative number of watts, got '%s'", arg);
        return 0;
    case OPT_RUNS:
        if (parse_int_range(arg, 1, MAX_RUNS, &o->runs) != 0)
            return bad("--runs: expected an integer from 1 to %d, got '%s'", MAX_RUNS, arg);
        return 0;
    default: /* OPT_THREADS */
        if (parse_int_range(arg, 0, PRS_PLAN_MAX_THREADS, &o->threads) != 0)
            return bad("--threads: expected an integer from 0 to %d, got '%s'",
                       PRS_PLAN_MAX_THREADS, arg);
        return 0;
    }
}

/* getopt_long's answer c: 0 to go on, -1 after --help, else bad()'s status. */
static int parse_one(int c, char **argv, bench_opts *o)
{
    switch (c) {
    case 'h':
        usage(stdout);
        return -1;
    case OPT_PROFILES:
        if (!*optarg) return bad("--profiles: empty directory name");
        o->profiles_dir = optarg;
        return 0;
    case OPT_SYNTH:
        if (!(o->synth = prs_gpu_preset_find(optarg))) {
            char names[256];
            return bad("--synth: unknown GPU preset '%s' (known: %s)", optarg,
                       prs_gpu_preset_names(names, sizeof names));
        }
        return 0;
    case OPT_MICROBATCHES:
        return parse_microbatches(optarg, o);
    case OPT_STAGES:
    case OPT_UNIT:
    case OPT_BLOCK:
    case OPT_RUNS:
    case OPT_THREADS:
        return parse_number_opt(c, optarg, o);
    case OPT_MODEL:
        return parse_model(optarg, o);
    case OPT_POLISH:
        if (prs_polish_kind_parse(optarg, &o->polish) != 0)
            return bad("--polish: expected auto, none, runs or all, got '%s'", optarg);
        return 0;
    case OPT_QUICK:
        o->quick = 1;
        return 0;
    case OPT_CSV:
        o->csv = 1;
        return 0;
    case OPT_STATS:
        o->stats = 1;
        return 0;
    case ':':
        return bad("option '%s' needs a value", argv[optind - 1]);
    default:
        /* a known long option refused (optopt: its value): given a value it takes none */
        if (optopt && strncmp(argv[optind - 1], "--", 2) == 0)
            return bad("option '%s' takes no value", argv[optind - 1]);
        if (optopt) return bad("unknown option '-%c' (see --help)", optopt);
        return bad("unknown option '%s' (see --help)", argv[optind - 1]);
    }
}

/* The options together: the run count, every pipeline, the profile source. */
static int check_args(bench_opts *o, char *dir_buf, size_t dir_len)
{
    if (o->runs == 0) o->runs = o->quick ? 1 : MIN_RUNS;
    if (o->runs < MIN_RUNS && !o->quick)
        return bad("--runs: at least %d runs are needed for a median (use --quick for fewer)",
                   MIN_RUNS);

    for (int k = 0; k < o->n_microbatches; k++) {
        prs_pipeline pipe = {.stages = o->stages,
                             .microbatches = o->microbatches[k],
                             .schedule = PRS_SCHEDULE_1F1B,
                             .unit_time_s = o->unit_time_s,
                             .blocking_power_w = o->blocking_power_w};
        prs_error err;
        if (prs_pipeline_check(&pipe, &err) != 0) return bad("%s", err.msg);
    }

    if (o->synth && o->stages > PRS_SYNTH_MAX_STAGES)
        return bad("--synth: at most %d stages", PRS_SYNTH_MAX_STAGES);
    if (o->synth && o->profiles_dir) return bad("--synth and --profiles exclude each other");
    if (!o->profiles_dir && !o->synth) {
        const char *shared = getenv("PRS_SHARED_DIR");
        int n = (shared && *shared) ? snprintf(dir_buf, dir_len, "%s/" DEFAULT_SUBDIR, shared)
                                    : snprintf(dir_buf, dir_len, "../shared/" DEFAULT_SUBDIR);
        if (n < 0 || (size_t)n >= dir_len) return bad("PRS_SHARED_DIR is too long");
        o->profiles_dir = dir_buf;
    }
    return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o, char *dir_buf, size_t dir_len)
{
    set_defaults(o);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int st = parse_one(c, argv, o);
        if (st) return st;
    }
    if (optind < argc) return bad("unexpected argument '%s' (see --help)", argv[optind]);
    return check_args(o, dir_buf, dir_len);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(names[k]);
    free(names);
}

/* Sorted file names of the regular *.csv files in dir. 0, or -1 with a message printed. */
static int list_profiles(const char *dir, char ***out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, PROG ": cannot open profile directory '%s': %s (see --profiles)\n", dir,
                strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".csv") != 0) continue;
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            char **grown = realloc(names, ncap * sizeof *grown);
            if (!grown) goto oom;
            names = grown;
            cap = ncap;
        }
        if (!(names[n] = strdup(e->d_name))) goto oom;
        n++;
    }
    closedir(d);
    if (n == 0) {
        fprintf(stderr, PROG ": no stage profiles (*.csv) in '%s' (see --profiles)\n", dir);
        free(names);
        return -1;
    }
    qsort(names, n, sizeof *names, cmp_str);
    *out = names;
    *count = n;
    return 0;
oom:
    closedir(d);
    free_names(names, n);
    fprintf(stderr, PROG ": out of memory\n");
    return -1;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Bytes read until EOF or len, or -1 on a read error. */
static ssize_t read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, p + got, len - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static void child_warn(void *ud, const char *msg)
{
    child_report *rep = ud;
    if (rep->warnings++ == 0) snprintf(rep->first_warn, sizeof rep->first_warn, "%s", msg);
}

/* The child's whole life: load, plan runs times, report through fd, _exit. */
static void run_child(int fd, const char *path, const bench_opts *o, int microbatches,
                      prs_cost_model model)
{
    child_report rep;
    memset(&rep, 0, sizeof rep);
    double *times = calloc(2 * (size_t)o->runs, sizeof *times);
    prs_profile *profile = NULL;
    prs_error err;
    err.msg[0] = '\0';
    if (!times) {
        rep.rc = PRS_ENOMEM;
        snprintf(rep.msg, sizeof rep.msg, "out of memory");
    } else if (o->synth) {
        prs_synth_opts so;
        prs_synth_opts_init(&so);
        so.gpu = o->synth;
        so.stages = o->stages;
        rep.rc = prs_synth_profile(&so, &profile, &err);
    } else {
        rep.rc = prs_profile_load(path, &profile, &err);
    }
    if (rep.rc == 0 && times) {
        prs_plan_opts opts;
        prs_plan_opts_default(&opts);
        opts.pipe.stages = o->stages;
        opts.pipe.microbatches = microbatches;
        opts.pipe.unit_time_s = o->unit_time_s;
        opts.pipe.blocking_power_w = o->blocking_power_w;
        opts.cost_model = model;
        opts.threads = o->threads;
        opts.polish = o->polish;
        opts.warn = child_warn;
        opts.ud = &rep;
        for (int k = 0; k < o->runs && rep.rc == 0; k++) {
            prs_frontier *f = NULL;
            prs_plan_stats st;
            double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
            rep.rc = prs_plan_counted(profile, &opts, &f, &st, &err);
            double t1 = clock_s(CLOCK_MONOTONIC), c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            if (k == 0) rep.stats = st;
            times[k] = t1 - t0;
            times[o->runs + k] = c1 - c0;
            if (rep.rc == 0 && k == 0) rep.points = (long)prs_frontier_size(f);
            prs_frontier_free(f);
        }
    }
    if (rep.rc != 0 && !rep.msg[0])
        snprintf(rep.msg, sizeof rep.msg, "%s", err.msg[0] ? err.msg : prs_strerror(rep.rc));
    int io = write_all(fd, &rep, sizeof rep);
    if (io == 0 && rep.rc == 0) io = write_all(fd, times, 2 * (size_t)o->runs * sizeof *times);
    prs_profile_free(profile);
    free(times);
    close(fd);
    _exit(io == 0 ? 0 : 3);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sort v[0..n) (n >= 1) and return its median. */
static double sort_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Run one case in a child. 0 with *res filled, or -1 with a message printed. */
static int run_case(const char *path, const char *name, const bench_opts *o, int microbatches,
                    prs_cost_model model, case_result *res)
{
    memset(res, 0, sizeof *res);
    const char *model_name = prs_cost_model_name(model);
    double *times = calloc(2 * (size_t)o->runs, sizeof *times);
    if (!times) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
        free(times);
        return -1;
    }
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        free(times);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(fds[1], path, o, microbatches, model);
    }
    close(fds[1]);

    child_report rep;
    ssize_t got_rep = read_all(fds[0], &rep, sizeof rep);
    ssize_t got_times = 0;
    if (got_rep == (ssize_t)sizeof rep && rep.rc == 0)
        got_times = read_all(fds[0], times, 2 * (size_t)o->runs * sizeof *times);
    close(fds[0]);

    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    pid_t w;
    do
        w = wait4(pid, &status, 0, &ru);
    while (w < 0 && errno == EINTR);

    int rc = -1;
    if (w < 0) {
        fprintf(stderr, PROG ": wait4: %s\n", strerror(errno));
    } else if (WIFSIGNALED(status)) {
        fprintf(stderr, PROG ": %s M=%d %s: child killed by signal %d\n", name, microbatches,
                model_name, WTERMSIG(status));
    } else if (got_rep != (ssize_t)sizeof rep) {
        fprintf(stderr, PROG ": %s M=%d %s: child sent no report (exit status %d)\n", name,
                microbatches, model_name, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    } else if (rep.rc != 0) {
        rep.msg[sizeof rep.msg - 1] = '\0';
        fprintf(stderr, PROG ": %s M=%d %s: %s\n", name, microbatches, model_name, rep.msg);
    } else if (got_times != (ssize_t)(2 * (size_t)o->runs * sizeof *times) || !WIFEXITED(status) ||
               WEXITSTATUS(status) != 0) {
        fprintf(stderr, PROG ": %s M=%d %s: child report truncated\n", name, microbatches,
                model_name);
    } else {
        if (rep.warnings > 0) {
            rep.first_warn[sizeof rep.first_warn - 1] = '\0';
            fprintf(stderr, PROG ": note: %s M=%d %s: %ld planner warning(s), first: %s\n", name,
                    microbatches, model_name, rep.warnings, rep.first_warn);
        }
        int n = o->runs;
        res->median_s = sort_median(times, n);
        res->cpu_median_s = sort_median(times + n, n);
        res->ok = 1;
        res->points = rep.points;
        res->stats = rep.stats;
        res->min_s = times[0];
        res->max_s = times[n - 1];
        res->peak_rss_bytes = (double)ru.ru_maxrss * 1024.0; /* Linux: ru_maxrss in KiB */
        rc = 0;
    }
    free(times);
    return rc;
}

/* Time target of a case in seconds, or 0 when it has none. */
static double time_target_s(const char *name, int microbatches)
{
    if (strncmp(name, "gpt3", 4) != 0) return 0;
    if (microbatches == 12) return TARGET_GPT3_M12_S;
    if (microbatches == 96) return TARGET_GPT3_M96_S;
    return 0;
}

static void print_header(const bench_opts *o, size_t n_profiles, int name_width)
{
    if (o->csv) {
        printf("profile,microbatches,cost_model,frontier_points,runs,median_s,min_s,max_s,"
               "cpu_median_s,peak_rss_bytes,time_target_s,time_verdict,rss_target_bytes,rss_"
               "verdict%s\n",
               o->stats ? ",steps,repeated_steps,raw_points,cuts,cuts_kept,same_ops,"
                          "level_searches,level_nodes,cut_searches,cut_nodes,evaluations,"
                          "reclaims,reclaim_moves,tracks,pick_s,polish_moves,polish_s"
                        : "");
        return;
    }
    double load[3];
    if (o->synth)
        printf("# bench_plan: the synthetic %s profile (perseus synth's defaults)\n",
               o->synth->name);
    else
        printf("# bench_plan: %zu profile(s) in %s\n", n_profiles, o->profiles_dir);
    char thr[32];
    if (o->threads)
        snprintf(thr, sizeof thr, "%d", o->threads);
    else
        snprintf(thr, sizeof thr, "one per processor");
    printf("# stages %d, unit time %g s, blocking power %g W, 1F1B, %d run(s) per case, planner "
           "threads %s, polish %s%s\n",
           o->stages, o->unit_time_s, o->blocking_power_w, o->runs, thr,
           prs_polish_kind_name(o->polish),
           o->quick ? " (--quick: not a measurement to quote)" : "");
    if (getloadavg(load, 3) == 3)
        printf("# %ld CPU(s) online, load average %.2f %.2f %.2f at start\n",
               sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
    printf("# targets: GPT-3 M=12 median < 40 ms, GPT-3 M=96 median < 2 s, "
           "peak RSS < 200 MB (10^6 B) on every case\n");
    printf("%-*s %5s %-5s %7s %11s %11s %11s %11s %8s  %-18s %s\n", name_width, "profile", "M",
           "model", "points", "median_ms", "min_ms", "max_ms", "cpu_ms", "rss_MB", "target",
           "verdict");
}

static void print_row(const bench_opts *o, const char *name, int name_width, int microbatches,
                      prs_cost_model model, const case_result *r)
{
    double t_target = time_target_s(name, microbatches);
    const char *model_name = prs_cost_model_name(model);
    char t_target_csv[32] = ""; /* empty field: no time target for this case */
    if (t_target > 0) snprintf(t_target_csv, sizeof t_target_csv, "%.9g", t_target);
    if (!r->ok) {
        if (o->csv)
            printf("%s,%d,%s,,%d,,,,,,%s,%s,%.0f,ERROR%s\n", name, microbatches, model_name,
                   o->runs, t_target_csv, t_target > 0 ? "ERROR" : "", TARGET_RSS_BYTES,
                   o->stats ? ",,,,,,,,,,,,," : "");
        else
            printf("%-*s %5d %-5s %7s %11s %11s %11s %11s %8s  %-18s %s\n", name_width, name,
                   microbatches, model_name, "-", "-", "-", "-", "-", "-", "-", "ERROR");
        return;
    }
    int time_miss = t_target > 0 && !(r->median_s < t_target);
    int rss_miss = !(r->peak_rss_bytes < TARGET_RSS_BYTES);
    if (o->csv) {
        printf("%s,%d,%s,%ld,%d,%.9g,%.9g,%.9g,%.9g,%.0f,", name, microbatches, model_name,
               r->points, o->runs, r->median_s, r->min_s, r->max_s, r->cpu_median_s,
               r->peak_rss_bytes);
        printf("%s,%s,%.0f,%s", t_target_csv,
               t_target <= 0 ? ""
               : time_miss   ? "MISS"
                             : "PASS",
               TARGET_RSS_BYTES, rss_miss ? "MISS" : "PASS");
        const prs_plan_stats *st = &r->stats;
        if (o->stats)
            printf(",%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%.9g,%ld,%.9g",
                   st->steps, st->repeated, st->points, st->cuts, st->cuts_kept, st->same_ops,
                   st->level_searches, st->level_nodes, st->cut_searches, st->cut_nodes,
                   st->evaluations, st->reclaims, st->reclaim_moves, st->tracks, st->pick_s,
                   st->polish_moves, st->polish_s);
        printf("\n");
        return;
    }
    char target[64];
    if (t_target > 0)
        snprintf(target, sizeof target, "t<%gms rss<200MB", t_target * 1e3);
    else
        snprintf(target, sizeof target, "rss<200MB");
    const char *verdict = time_miss && rss_miss ? "MISS (time, rss)"
                          : time_miss           ? "MISS (time)"
                          : rss_miss            ? "MISS (rss)"
                                                : "PASS";
    printf("%-*s %5d %-5s %7ld %11.3f %11.3f %11.3f %11.3f %8.1f  %-18s %s\n", name_width, name,
           microbatches, model_name, r->points, r->median_s * 1e3, r->min_s * 1e3, r->max_s * 1e3,
           r->cpu_median_s * 1e3, r->peak_rss_bytes / 1e6, target, verdict);
}

/* x / n, or 0 when n is 0. */
static double per(long x, long n)
{
    return n > 0 ? (double)x / (double)n : 0;
}

/* The text output's line of what a case's first planning run did (--stats). */
static void print_stats(const char *name, int microbatches, prs_cost_model model,
                        const case_result *r)
{
    const prs_plan_stats *st = &r->stats;
    printf("# %s M=%d %s: %ld steps (%ld repeated) for %ld raw points; %ld cuts solved, %ld "
           "kept; %ld steps change the computations of the step before; per cut %.2f level "
           "searches of %.0f nodes and %.2f cut searches of %.0f nodes; %ld evaluations; %ld "
           "reclaimings by rate of %.1f moves; %ld roundings along the relaxed schedule; "
           "%.1f ms picking plans; %.1f ms polishing (%ld moves)\n",
           name, microbatches, prs_cost_model_name(model), st->steps, st->repeated, st->points,
           st->cuts, st->cuts_kept, st->same_ops, per(st->level_searches, st->cuts),
           per(st->level_nodes, st->level_searches), per(st->cut_searches, st->cuts),
           per(st->cut_nodes, st->cut_searches), st->evaluations, st->reclaims,
           per(st->reclaim_moves, st->reclaims), st->tracks, st->pick_s * 1e3, st->polish_s * 1e3,
           st->polish_moves);
}

int main(int argc, char **argv)
{
    bench_opts o;
    char dir_buf[4096];
    int st = parse_args(argc, argv, &o, dir_buf, sizeof dir_buf);
    if (st == -1) return 0;
    if (st) return st;

    char **files;
    size_t n_files;
    if (o.synth) {
        char name[256];
        snprintf(name, sizeof name, "synth-%s.csv", o.synth->name);
        files = malloc(sizeof *files);
        if (!files || !(files[0] = strdup(name))) {
            free(files);
            fprintf(stderr, PROG ": out of memory\n");
            return 1;
        }
        n_files = 1;
    } else if (list_profiles(o.profiles_dir, &files, &n_files) != 0) {
        return 1;
    }

    int name_width = 7;
    for (size_t k = 0; k < n_files; k++) {
        int len = (int)strlen(files[k]) - 4;
        if (len > name_width) name_width = len;
    }
    print_header(&o, n_files, name_width);

    int failures = 0;
    for (size_t k = 0; k < n_files; k++) {
        char path[4096 + 256], name[256];
        snprintf(path, sizeof path, "%s/%s", o.profiles_dir, files[k]);
        snprintf(name, sizeof name, "%.*s", (int)strlen(files[k]) - 4, files[k]);
        for (int m = 0; m < o.n_microbatches; m++) {
            case_result r[2];
            for (int c = 0; c < o.n_models; c++) {
                prs_cost_model model = (prs_cost_model)o.models[c];
                if (run_case(path, name, &o, o.microbatches[m], model, &r[c]) != 0) failures++;
                print_row(&o, name, name_width, o.microbatches[m], model, &r[c]);
                if (o.stats && !o.csv && r[c].ok)
                    print_stats(name, o.microbatches[m], model, &r[c]);
                fflush(stdout);
            }
            if (o.n_models == 2 && !o.csv && r[0].ok && r[1].ok && r[0].median_s > 0)
                printf("# %s M=%d: hull/exp median time ratio %.3f (CPU time %.3f)\n", name,
                       o.microbatches[m], r[1].median_s / r[0].median_s,
                       r[0].cpu_median_s > 0 ? r[1].cpu_median_s / r[0].cpu_median_s : 0);
        }
    }
    free_names(files, n_files);
    if (failures) {
        fprintf(stderr, PROG ": %d case(s) failed\n", failures);
        return 1;
    }
    return 0;
}
