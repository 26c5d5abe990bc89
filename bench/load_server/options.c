/* load_server: defaults and command-line options. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_server.h"

/* ---- options ---- */

static const char usage[] =
    "usage: load_server [--ranks R] [--stages S] [--microbatches M] [--clocks F1,F2,...]\n"
    "                   [--warmup-iterations W] [--iterations-per-clock K]\n"
    "                   [--connections C] [--wait-ms MS] [--pollers P] [--poll-seconds D]\n"
    "                   [--poll-interval-ms MS] [--poll-warmup-ms MS] [--slowdown X]\n"
    "                   [--timeout S] [--perseusd PATH] [--threads N] [--upload-profile]\n"
    "Starts perseusd on 127.0.0.1 (port 0, scratch data directory; loopback only) and takes one\n"
    "job of R simulated ranks (S stages x R/S pipelines, 1F1B, M microbatches) through every\n"
    "phase with libcurl multi over at most C keep-alive connections: registration and first\n"
    "schedule (target < 10 s), profiling (each rank posts W warm-up + K iterations per clock of\n"
    "the list, windows from the simulated A100), planning, D seconds of schedule polls by P\n"
    "pollers (after a warm-up that is not counted; target p99 < 20 ms), a straggler on pipeline 0\n"
    "at X times the fastest plan's time (other pipelines must switch plans, and back when it is\n"
    "cleared), completion.\n"
    "Defaults: 8192 ranks, 8 stages, 8 microbatches, clocks 1410,1200,1000, W 1, K 1,\n"
    "1024 connections, 1024 pollers, 5 s of polls after 500 ms of warm-up, back to back\n"
    "(interval 0: a poller sends its next request when the last is answered; MS > 0: one request\n"
    "per MS per poller), slowdown 1.2, perseusd's default thread count (one per online CPU),\n"
    "perseusd beside this program's folder.\n"
    "A rank waiting for the others re-polls its schedule when an answer shows the job moved on,\n"
    "or after --wait-ms (default 1000, about an iteration) at the latest.\n"
    "--upload-profile uploads the simulated GPU's profile right after creating the job, so the\n"
    "job plans at once and the ranks skip profiling (how a large job is run).\n"
    "Bounds: R <= 65536, S <= 1024, M <= 64, C and P <= 4096, D <= 60 s, at most 16 clocks;\n"
    "deadlines: 60 s to the last schedule, 120 s of profiling, 120 s of planning, 60 s per\n"
    "straggler check, --timeout (default 300 s) for the whole run.\n"
    "Exit status: 0 when the job went through every phase without an error or a failed check\n"
    "(a missed latency target alone still exits 0), 1 otherwise, 2 on a bad argument.\n";

static int parse_int(const char *s, const char *name, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "load_server: %s: expected an integer in %ld..%ld, got '%s'\n", name, lo,
                hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, const char *name, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "load_server: %s: expected a number in %g..%g, got '%s'\n", name, lo, hi,
                s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_clocks(gen *g, const char *s)
{
    g->nclocks = 0;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", s);
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (g->nclocks == MAX_CLOCKS) {
            fprintf(stderr, "load_server: --clocks: at most %d clocks\n", MAX_CLOCKS);
            return -1;
        }
        if (parse_int(t, "--clocks", 1, 100000, &g->clocks[g->nclocks])) return -1;
        for (int i = 0; i < g->nclocks; i++)
            if (g->clocks[i] == g->clocks[g->nclocks]) {
                fprintf(stderr, "load_server: --clocks: %d twice\n", g->clocks[i]);
                return -1;
            }
        g->nclocks++;
    }
    if (!g->nclocks) {
        fputs("load_server: --clocks: no clock\n", stderr);
        return -1;
    }
    return 0;
}

/* A millisecond option, in seconds. */
static int parse_ms(const char *s, const char *name, double lo, double hi, double *out_s)
{
    double ms;
    if (parse_real(s, name, lo, hi, &ms)) return -1;
    *out_s = ms / 1e3;
    return 0;
}

enum { O_MB = 256, O_CLOCKS, O_WARMUP, O_ITERS, O_WAIT, O_PWARM, O_SLOW, O_TIMEOUT, O_UPLOAD };
static const struct option opts[] = {{"ranks", required_argument, NULL, 'r'},
                                     {"stages", required_argument, NULL, 's'},
                                     {"microbatches", required_argument, NULL, O_MB},
                                     {"clocks", required_argument, NULL, O_CLOCKS},
                                     {"warmup-iterations", required_argument, NULL, O_WARMUP},
                                     {"iterations-per-clock", required_argument, NULL, O_ITERS},
                                     {"connections", required_argument, NULL, 'c'},
                                     {"wait-ms", required_argument, NULL, O_WAIT},
                                     {"pollers", required_argument, NULL, 'p'},
                                     {"poll-seconds", required_argument, NULL, 'd'},
                                     {"poll-interval-ms", required_argument, NULL, 'i'},
                                     {"poll-warmup-ms", required_argument, NULL, O_PWARM},
                                     {"slowdown", required_argument, NULL, O_SLOW},
                                     {"timeout", required_argument, NULL, O_TIMEOUT},
                                     {"perseusd", required_argument, NULL, 'b'},
                                     {"threads", required_argument, NULL, 't'},
                                     {"upload-profile", no_argument, NULL, O_UPLOAD},
                                     {"help", no_argument, NULL, 'h'},
                                     {NULL, 0, NULL, 0}};

/* The defaults, and the perseusd beside this program's build folder. */
static void set_defaults(gen *g, const char *argv0, char *bin, size_t binsize)
{
    g->ranks = 8192;
    g->stages = 8;
    g->microbatches = 8;
    g->conns = 1024;
    g->pollers = 1024;
    g->threads = 0;
    g->warmup = 1;
    g->iters = 1;
    g->poll_s = 5;
    g->poll_warm_s = 0.5;
    g->wait_s = 1.0;
    g->slowdown = 1.2;
    g->watchdog_s = 300;
    g->timer_at = -1;
    g->epfd = -1;
    parse_clocks(g, "1410,1200,1000");
    char *self = strdup(argv0);
    if (!self) ls_oom();
    snprintf(bin, binsize, "%s/../perseusd", dirname(self));
    free(self);
}

/* One option o with its argument arg: 0, -1 when it is bad (with a message), 1 for --help. */
static int parse_one(gen *g, int o, const char *arg, char *bin, size_t binsize)
{
    switch (o) {
    case 'r':
        return parse_int(arg, "--ranks", 1, MAX_RANKS, &g->ranks);
    case 's':
        return parse_int(arg, "--stages", 1, 1024, &g->stages);
    case O_MB:
        return parse_int(arg, "--microbatches", 1, MAX_MICROBATCHES, &g->microbatches);
    case O_CLOCKS:
        return parse_clocks(g, arg);
    case O_WARMUP:
        return parse_int(arg, "--warmup-iterations", 0, MAX_ITERS, &g->warmup);
    case O_ITERS:
        return parse_int(arg, "--iterations-per-clock", 1, MAX_ITERS, &g->iters);
    case 'c':
        return parse_int(arg, "--connections", 1, MAX_CONNECTIONS, &g->conns);
    case O_WAIT:
        return parse_ms(arg, "--wait-ms", 1, 10000, &g->wait_s);
    case 'p':
        return parse_int(arg, "--pollers", 1, MAX_POLLERS, &g->pollers);
    case 'd':
        return parse_real(arg, "--poll-seconds", 0.1, 60, &g->poll_s);
    case 'i':
        return parse_ms(arg, "--poll-interval-ms", 0, 10000, &g->interval_s);
    case O_PWARM:
        return parse_ms(arg, "--poll-warmup-ms", 0, 10000, &g->poll_warm_s);
    case O_UPLOAD:
        g->upload = 1;
        return 0;
    case O_SLOW:
        return parse_real(arg, "--slowdown", 1.01, 10, &g->slowdown);
    case O_TIMEOUT:
        return parse_real(arg, "--timeout", 10, 3600, &g->watchdog_s);
    case 'b':
        snprintf(bin, binsize, "%s", arg);
        return 0;
    case 't':
        return parse_int(arg, "--threads", 0, 64, &g->threads);
    case 'h':
        return 1;
    default:
        return -1;
    }
}

/* What follows from the options: pipelines, pollers and connections at most one per rank, the
 * simulated GPU and its pipeline. */
static void derive(gen *g)
{
    g->dp = g->ranks / g->stages;
    if (g->pollers > g->ranks) {
        fprintf(stderr, "load_server: %d pollers for %d ranks: using %d (one rank each)\n",
                g->pollers, g->ranks, g->ranks);
        g->pollers = g->ranks;
    }
    if (g->conns > g->ranks) g->conns = g->ranks;
    g->gpu = prs_gpu_preset_find("a100");
    g->pipe = (prs_pipeline){
        g->stages, g->microbatches, PRS_SCHEDULE_1F1B, 0.001, g->gpu->blocking_power_w, 0, 0};
    g->ops = prs_ops_per_stage(&g->pipe);
}

/* The defaults, then the options; bin gets the perseusd to run. Returns -1 to go on, else the
 * exit status: 0 after --help, 2 on a bad argument (with the usage on stderr). */
int ls_parse_options(gen *g, int argc, char **argv, char *bin, size_t binsize)
{
    set_defaults(g, argv[0], bin, binsize);
    int o, bad = 0;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int r = parse_one(g, o, optarg, bin, binsize);
        if (r > 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (r) bad = 1;
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "load_server: unexpected argument '%s'\n", argv[optind]);
        bad = 1;
    }
    if (!bad && g->ranks % g->stages) {
        fprintf(stderr, "load_server: --ranks %d is not a multiple of --stages %d\n", g->ranks,
                g->stages);
        bad = 1;
    }
    if (bad) {
        fputs(usage, stderr);
        return 2;
    }
    derive(g);
    return -1;
}
