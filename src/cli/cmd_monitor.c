/* perseus monitor: the energy and average power of a command's run on each GPU (perseus/monitor.h,
 * docs/monitor.md), and with --csv a power trace. Parse (options and the command after --), run
 * (open the monitor, one window over the whole run, fork and exec the command, trace windows
 * every --interval while it runs, to --csv or as lines on stderr, wait for it) and print (a line
 * per GPU on stderr, so the command's own output stays clean; --json FILE for scripts). The
 * command's exit status is ours.
 *
 * The trace is ticked by a thread of its own (an end_window waits for the counter), so the run's
 * window ends as soon as the command does. The parent ignores SIGINT and SIGQUIT while the
 * command runs, as time(1) does: a Ctrl-C stops the command, and the report is still printed. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "perseus/clock.h"
#include "perseus/monitor.h"
#include "perseus/numfmt.h"

static const char usage[] =
    "usage: perseus monitor [--gpus LIST] [--interval SEC] [--csv FILE] [--json FILE]\n"
    "                       -- COMMAND [ARG...]\n"
    "\n"
    "Run COMMAND and report the energy each GPU used over its run and its average power,\n"
    "on stderr. The exit status is COMMAND's (128 + N when killed by signal N).\n"
    "\n"
    "  --gpus LIST      comma-separated GPUs: nvml:INDEX, nvml:uuid=GPU-..., nvml:pci=...,\n"
    "                   sim:PRESET (an idle simulated GPU); default: every NVIDIA GPU\n"
    "  --csv FILE       also write a power trace: time_s,gpu,power_w,energy_j,estimate, one\n"
    "                   row per GPU every --interval\n"
    "  --interval SEC   the trace's period, 0.05 to 3600 (default 1); without --csv, a\n"
    "                   line per period on stderr with each GPU's power\n"
    "  --json FILE      also write the report as JSON\n"
    "  -h, --help       this help\n"
    "\n"
    "A figure the GPU's energy counter could not measure (a run shorter than the counter's\n"
    "refresh period) is marked 'estimate'.\n"
    "\n"
    "examples:\n"
    "  perseus monitor -- python train.py\n"
    "  perseus monitor --gpus sim:a100 --csv power.csv --interval 0.5 -- sleep 2\n";

typedef struct monitor_args {
    const char *gpus, *csv, *json;
    double interval_s;
    int interval_given;
    char **command;
} monitor_args;

static int parse(int argc, char **argv, monitor_args *a, int *done)
{
    static const struct option opts[] = {
        {"gpus", required_argument, 0, 'g'},     {"csv", required_argument, 0, 'c'},
        {"interval", required_argument, 0, 'i'}, {"json", required_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->interval_s = 1;
    *done = 0;
    int c;
    optind = 1;
    opterr = 0;
    /* "+": stop at the first non-option, so the command's own options are left alone */
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        switch (c) {
        case 'g':
            a->gpus = optarg;
            break;
        case 'c':
            a->csv = optarg;
            break;
        case 'i':
            if (prs_num_parse_double(optarg, &a->interval_s) || !(a->interval_s >= 0.05) ||
                a->interval_s > 3600)
                return prs_cli_usage_error("monitor", "--interval: expected 0.05 to 3600 s, got",
                                           optarg);
            a->interval_given = 1;
            break;
        case 'j':
            a->json = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            *done = 1;
            return 0;
        case ':':
            return prs_cli_usage_error("monitor", "missing value for", argv[optind - 1]);
        default:
            return prs_cli_unknown_option("monitor", argv[optind - 1], opts);
        }
    }
    if (optind >= argc)
        return prs_cli_usage_error("monitor", "missing the command to run (after --)", NULL);
    a->command = argv + optind;
    return 0;
}

/* The trace: one window per period, the next begun before the last is ended (no gap), ticked by
 * a thread of its own so that waiting for the counter never delays noticing the command's end. */
typedef struct trace {
    FILE *f;
    prs_monitor *m;
    double t0_s, period_s;
    int k;   /* the open window is "trace-(k % 2)" */
    int csv; /* f is the --csv file; else stderr, one line per period */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, started;
    pthread_t thread;
    prs_monitor_reading r[PRS_MONITOR_MAX_GPUS];
} trace;

static int trace_tick(trace *tr)
{
    char open[16], next[16];
    snprintf(open, sizeof open, "trace-%d", tr->k % 2);
    snprintf(next, sizeof next, "trace-%d", (tr->k + 1) % 2);
    prs_error err = {0, ""};
    double t = prs_mono_s() - tr->t0_s;
    if (prs_monitor_begin_window(tr->m, next, &err) ||
        prs_monitor_end_window(tr->m, open, tr->r, PRS_MONITOR_MAX_GPUS, &err)) {
        fprintf(stderr, "perseus monitor: trace: %s\n", err.msg);
        return -1;
    }
    tr->k++;
    if (!tr->csv) fprintf(tr->f, "perseus monitor: %.3f s:", t);
    for (int i = 0; i < prs_monitor_gpus(tr->m); i++) {
        const prs_monitor_reading *r = &tr->r[i];
        double w = r->time_s > 0 ? r->energy_j / r->time_s : 0;
        if (tr->csv)
            fprintf(tr->f, "%.6f,%d,%.6g,%.6g,%d\n", t, i, w, r->energy_j, r->estimate);
        else
            fprintf(tr->f, " GPU %d %.6g W%s", i, w, r->estimate ? " (estimate)" : "");
    }
    if (!tr->csv) fputc('\n', tr->f);
    fflush(tr->f);
    return 0;
}

static void *trace_main(void *arg)
{
    trace *tr = arg;
    double next = tr->t0_s + tr->period_s;
    pthread_mutex_lock(&tr->mu);
    while (!tr->stop) {
        struct timespec ts = prs_mono_timespec(next);
        if (pthread_cond_timedwait(&tr->cv, &tr->mu, &ts) != ETIMEDOUT) continue;
        pthread_mutex_unlock(&tr->mu);
        int bad = trace_tick(tr);
        pthread_mutex_lock(&tr->mu);
        if (bad) break;
        next += tr->period_s;
        if (next < prs_mono_s()) next = prs_mono_s(); /* fell behind: do not catch up */
    }
    pthread_mutex_unlock(&tr->mu);
    return NULL;
}

static void trace_stop(trace *tr)
{
    if (!tr->started) return;
    pthread_mutex_lock(&tr->mu);
    tr->stop = 1;
    pthread_cond_broadcast(&tr->cv);
    pthread_mutex_unlock(&tr->mu);
    pthread_join(tr->thread, NULL);
    tr->started = 0;
}

/* Fork and exec the command (SIGINT and SIGQUIT back to their defaults in the child). */
static pid_t spawn(char **command)
{
    pid_t pid = fork();
    if (pid != 0) return pid;
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    execvp(command[0], command);
    fprintf(stderr, "perseus monitor: cannot run '%s': %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

/* Wait for pid; its exit status as a shell reports it. */
static int wait_child(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void report(const monitor_args *a, prs_monitor *m, const prs_monitor_reading *r, int status)
{
    fprintf(stderr, "perseus monitor: '%s' ran %.3f s, exit status %d\n", a->command[0],
            r[0].time_s, status);
    for (int i = 0; i < prs_monitor_gpus(m); i++)
        fprintf(stderr, "  GPU %d %s: %.6g J, %.6g W average%s\n", i, prs_monitor_gpu_name(m, i),
                r[i].energy_j, r[i].time_s > 0 ? r[i].energy_j / r[i].time_s : 0,
                r[i].estimate ? " (estimate)" : "");
    if (!a->json) return;
    json_t *gpus = json_array();
    for (int i = 0; i < prs_monitor_gpus(m); i++)
        json_array_append_new(gpus, json_pack("{s:i, s:s, s:f, s:f, s:f, s:b}", "gpu", i, "name",
                                              prs_monitor_gpu_name(m, i), "time_s", r[i].time_s,
                                              "energy_j", r[i].energy_j, "power_w",
                                              r[i].time_s > 0 ? r[i].energy_j / r[i].time_s : 0.0,
                                              "estimate", r[i].estimate));
    json_t *o = json_pack("{s:s, s:i, s:f, s:o}", "command", a->command[0], "exit_status", status,
                          "time_s", r[0].time_s, "gpus", gpus);
    if (!o || json_dump_file(o, a->json, JSON_INDENT(2)) != 0)
        fprintf(stderr, "perseus monitor: cannot write %s\n", a->json);
    json_decref(o);
}

/* Open the monitor on --gpus (or every NVIDIA GPU): 0, or the exit status (message printed). */
static int open_monitor(const monitor_args *a, prs_monitor **m)
{
    char buf[4096];
    const char *specs[PRS_MONITOR_MAX_GPUS];
    int n = prs_cli_gpu_specs("monitor", a->gpus, buf, sizeof buf, specs, PRS_MONITOR_MAX_GPUS);
    if (n < 0) return -n;
    prs_error err = {0, ""};
    if (prs_monitor_open(specs, n, m, &err)) {
        fprintf(stderr, "perseus monitor: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int prs_cmd_monitor(int argc, char **argv)
{
    monitor_args a;
    int done, rc = parse(argc, argv, &a, &done);
    if (rc || done) return rc;
    if (!a.command || !a.command[0]) return 2; /* parse has said why; stated for the analyzer */
    trace tr = {0};
    if (a.csv) {
        if (prs_cli_make_parent("monitor", a.csv)) return 1;
        if (!(tr.f = fopen(a.csv, "w"))) {
            fprintf(stderr, "perseus monitor: cannot write %s: %s\n", a.csv, strerror(errno));
            return 1;
        }
        fputs("time_s,gpu,power_w,energy_j,estimate\n", tr.f);
        tr.csv = 1;
    } else if (a.interval_given) {
        tr.f = stderr;
    }
    prs_monitor *m = NULL;
    if ((rc = open_monitor(&a, &m)) != 0) {
        if (tr.csv) fclose(tr.f);
        return rc;
    }
    static prs_monitor_reading r[PRS_MONITOR_MAX_GPUS];
    prs_error err = {0, ""};
    tr.m = m;
    tr.period_s = a.interval_s;
    tr.t0_s = prs_mono_s();
    int status = 1;
    if (prs_monitor_begin_window(m, "run", &err) ||
        (tr.f && prs_monitor_begin_window(m, "trace-0", &err))) {
        fprintf(stderr, "perseus monitor: %s\n", err.msg);
    } else {
        if (tr.f && prs_sync_init_mono(&tr.mu, &tr.cv) == 0)
            tr.started = pthread_create(&tr.thread, NULL, trace_main, &tr) == 0;
        if (tr.f && !tr.started) fprintf(stderr, "perseus monitor: trace: cannot start\n");
        void (*old_int)(int) = signal(SIGINT, SIG_IGN), (*old_quit)(int) = signal(SIGQUIT, SIG_IGN);
        pid_t pid = spawn(a.command);
        if (pid < 0)
            fprintf(stderr, "perseus monitor: cannot start '%s': %s\n", a.command[0],
                    strerror(errno));
        else
            status = wait_child(pid);
        signal(SIGINT, old_int);
        signal(SIGQUIT, old_quit);
        if (prs_monitor_end_window(m, "run", r, PRS_MONITOR_MAX_GPUS, &err))
            fprintf(stderr, "perseus monitor: %s\n", err.msg);
        else if (pid > 0)
            report(&a, m, r, status);
        int traced = tr.started;
        trace_stop(&tr);
        if (traced && pid > 0 && tr.csv) trace_tick(&tr); /* the last stretch */
        if (traced) {
            pthread_mutex_destroy(&tr.mu);
            pthread_cond_destroy(&tr.cv);
        }
    }
    prs_monitor_close(m);
    if (tr.csv && fclose(tr.f) != 0) fprintf(stderr, "perseus monitor: cannot write %s\n", a.csv);
    return status;
}
