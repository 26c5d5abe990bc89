/* perseus-gpud: options, signals' dispositions and the three modes (docs/gpud.md):
 *   system daemon (default)  listen on --socket, lend GPUs to the users --config allows
 *   --private-fd N --gpu SPEC  serve one connected socket for one GPU, with the caller's rights
 *   --list                    print the GPUs, read-only, and exit */
#define _GNU_SOURCE /* setsid, getsid */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpud.h"
#include "perseus/limits.h"
#include "suggest.h"

#ifndef PRS_VERSION
#define PRS_VERSION "0"
#endif

typedef struct opts {
    const char *socket_path, *config_path, *state_dir, *nvml_library, *gpu_spec;
    gpud_log_level level;
    int list, private_fd;
    long parent_pid;
} opts;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perseus-gpud [OPTIONS]\n"
            "The per-node GPU daemon: the only process that changes GPU clocks. Trainers lease a\n"
            "GPU over a Unix socket and ask for SM clocks; the daemon resets the clocks when the\n"
            "lease ends for any reason (docs/gpud.md).\n\n"
            "  --socket PATH         listening socket (default " GPUD_DEFAULT_SOCKET ")\n"
            "  --config PATH         who may lease which GPUs (default " GPUD_DEFAULT_CONFIG ";\n"
            "                        without it only root may)\n"
            "  --state-dir DIR       lease file directory (default " GPUD_DEFAULT_STATE_DIR ")\n"
            "  --nvml-library PATH   NVML library (default $PRS_NVML_LIBRARY, else "
            "libnvidia-ml.so.1)\n"
            "  --log-level LEVEL     error, warn, info (default) or debug; logs go to stderr\n"
            "  --list                print the GPUs (read-only) and exit\n"
            "  --private-fd N        serve the one connected socket N (private mode, no config)\n"
            "  --gpu SPEC            private mode: the GPU, nvml:INDEX or nvml:GPU-UUID\n"
            "  --parent-pid P        private mode: exit (after resetting) when P exits\n"
            "  --version, --help\n\n"
            "examples:\n"
            "  perseus-gpud --list\n"
            "  perseus-gpud --config /etc/perseus/gpud.conf --log-level debug\n"
            "  perseus-gpud --socket /tmp/gpud.sock --state-dir /tmp/gpud --config ./gpud.conf\n"
            "  perseus-gpud --private-fd 3 --gpu nvml:0 --parent-pid 1234\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "perseus-gpud: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see perseus-gpud --help)\n");
    return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* One option with its value; 0, or the exit code (2) after a message. */
static int take_option(opts *o, const char *name, const char *val)
{
    static const char *const known[] = {"--socket", "--config",    "--state-dir",  "--nvml-library",
                                        "--gpu",    "--log-level", "--private-fd", "--parent-pid"};
    static const char *const all[] = {"--socket", "--config",    "--state-dir",  "--nvml-library",
                                      "--gpu",    "--log-level", "--private-fd", "--parent-pid",
                                      "--list",   "--version",   "--help"};
    int is_known = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        is_known |= strcmp(name, known[i]) == 0;
    if (!is_known) {
        const char *near = prs__suggest(name, all, sizeof all / sizeof all[0]);
        if (!near) return bad("unknown option '%s'", name);
        fprintf(stderr, "perseus-gpud: unknown option '%s' (did you mean '%s'?)\n", name, near);
        return 2;
    }
    long v;
    if (!val) return bad("option %s needs a value", name);
    if (strcmp(name, "--socket") == 0)
        o->socket_path = val;
    else if (strcmp(name, "--config") == 0)
        o->config_path = val;
    else if (strcmp(name, "--state-dir") == 0)
        o->state_dir = val;
    else if (strcmp(name, "--nvml-library") == 0)
        o->nvml_library = val;
    else if (strcmp(name, "--gpu") == 0)
        o->gpu_spec = val;
    else if (strcmp(name, "--log-level") == 0) {
        if (gpud_log_parse_level(val, &o->level))
            return bad("--log-level '%s': expected error, warn, info or debug", val);
    } else if (strcmp(name, "--private-fd") == 0) {
        if (parse_long(val, 0, 1 << 20, &v)) return bad("--private-fd '%s': expected a fd", val);
        o->private_fd = (int)v;
    } else if (strcmp(name, "--parent-pid") == 0) {
        if (parse_long(val, 1, 1L << 30, &v)) return bad("--parent-pid '%s': expected a pid", val);
        o->parent_pid = v;
    } else
        return bad("unknown option '%s'", name);
    return 0;
}

/* 0: run; 1: done (help, version); 2: bad options. */
static int parse_opts(int argc, char **argv, opts *o)
{
    *o = (opts){GPUD_DEFAULT_SOCKET,
                GPUD_DEFAULT_CONFIG,
                GPUD_DEFAULT_STATE_DIR,
                NULL,
                NULL,
                GPUD_LOG_INFO,
                0,
                -1,
                0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("perseus-gpud %s (protocol %d)\n", PRS_VERSION, GPUD_PROTO_VERSION);
            return 1;
        }
        if (strcmp(a, "--list") == 0) {
            o->list = 1;
            continue;
        }
        int rc = take_option(o, a, i + 1 < argc ? argv[i + 1] : NULL);
        if (rc) return rc;
        i++;
    }
    if (o->private_fd >= 0 && !o->gpu_spec) return bad("%s needs --gpu SPEC", "--private-fd");
    if (o->private_fd < 0 && (o->gpu_spec || o->parent_pid))
        return bad("%s: --gpu and --parent-pid are for private mode", "--private-fd N missing");
    if (o->list && o->private_fd >= 0)
        return bad("%s cannot be combined with --private-fd", "--list");
    return 0;
}

static int fail(const char *what, const prs_error *err)
{
    char q[600];
    gpud_log(GPUD_LOG_ERROR, "msg=%s detail=%s", what, gpud_logq(err->msg, q, sizeof q));
    fprintf(stderr, "perseus-gpud: %s\n", err->msg);
    return 1;
}

static int run_list(gpud *d)
{
    prs_error err;
    if (gpud_gpus_open_all(d, NULL, &err)) return fail("no_gpus", &err);
    gpud_gpus_print(d, stdout);
    return 0;
}

static int run_private(gpud *d, const opts *o)
{
    if (getsid(0) != getpid()) setsid(); /* out of the trainer's process group */
    prs_error err;
    prs_gpu *g;
    if (prs_gpu_open(o->gpu_spec, &g, &err)) return fail("gpu_open_failed", &err);
    long idx = 0;
    if (strncmp(o->gpu_spec, "nvml:", 5) == 0 &&
        parse_long(o->gpu_spec + 5, 0, PRS_MAX_GPU_INDEX, &idx))
        idx = 0;
    if (gpud_gpus_add(d, g, (int)idx, &err)) return fail("gpu_open_failed", &err);
    d->watch_pids = 1;
    gpud_server_opts so = {NULL, o->private_fd, o->parent_pid};
    return gpud_serve(d, &so, &err) ? fail("private_mode_failed", &err) : 0;
}

static int run_system(gpud *d, const opts *o)
{
    prs_error err;
    d->config_path = o->config_path;
    d->state_dir = o->state_dir;
    d->watch_pids = 1;
    if (gpud_config_load(o->config_path, &d->cfg, &err)) return fail("bad_config", &err);
    if (!d->cfg.present)
        gpud_log(GPUD_LOG_WARN, "msg=no_config path=%s effect=only_root_may_lease", o->config_path);
    if (gpud_gpus_open_all(d, NULL, &err)) return fail("no_gpus", &err);
    if (mkdir(o->state_dir, 0755) != 0 && errno != EEXIST) {
        prs_error_set(&err, PRS_EIO, "--state-dir %s: %s", o->state_dir, strerror(errno));
        return fail("bad_state_dir", &err);
    }
    gpud_leases_recover(d);
    gpud_server_opts so = {o->socket_path, -1, 0};
    if (gpud_serve(d, &so, &err)) return fail("serve_failed", &err);
    gpud_log(GPUD_LOG_INFO, "msg=stopped");
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    gpud_log_setup(2, o.level);
    if (!o.list) gpud_signals_block(o.private_fd >= 0); /* before NVML starts its threads */
    if (o.nvml_library) setenv("PRS_NVML_LIBRARY", o.nvml_library, 1);
    gpud *d = calloc(1, sizeof *d);
    if (!d) return 1;
    if (o.list)
        rc = run_list(d);
    else if (o.private_fd >= 0)
        rc = run_private(d, &o);
    else
        rc = run_system(d, &o);
    gpud_gpus_close(d);
    gpud_config_free(&d->cfg);
    free(d);
    return rc;
}
