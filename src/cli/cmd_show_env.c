/* perseus show-env: what the library sees on this machine, changing nothing. The NVML library and
 * its GPUs, the rank's GPU as the client would pick it (LOCAL_RANK, CUDA_VISIBLE_DEVICES), whether
 * perseus-gpud answers at its socket, and per GPU: name, UUID, PCI address, supported and current
 * SM clocks, whether its energy counter reads (else the client and the monitor fall back to power
 * readings) and the power now. Read-only calls only: no clock is locked or reset. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"
#include "perseus/gpu.h"
#include "perseus/monitor.h"

static const char usage[] =
    "usage: perseus show-env [--gpus LIST]\n"
    "\n"
    "Print what Perseus sees: the NVIDIA management library and its GPUs, this rank's GPU,\n"
    "perseus-gpud, and each GPU's identity, clocks, energy counter and power. Changes nothing.\n"
    "\n"
    "  --gpus LIST   comma-separated GPUs to describe (nvml:INDEX, nvml:uuid=GPU-...,\n"
    "                sim:PRESET); default: every NVIDIA GPU\n"
    "  -h, --help    this help\n";

static const char *env_or(const char *name, const char *unset)
{
    const char *v = getenv(name);
    return v ? v : unset;
}

/* perseus-gpud: "answers", or why not. */
static const char *gpud_state(const char *path, char *buf, size_t n)
{
    if (!prs_gpud_available(path)) return "not running (no socket)";
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (fd < 0 || strlen(path) >= sizeof sa.sun_path) {
        if (fd >= 0) close(fd);
        return "socket present, cannot connect";
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    close(fd);
    if (rc == 0) return "answers";
    snprintf(buf, n, "socket present, connect failed: %s", strerror(e));
    return buf;
}

static void show_machine(void)
{
    unsigned count = 0;
    prs_error err = {0, ""};
    const char *lib = env_or("PRS_NVML_LIBRARY", "libnvidia-ml.so.1");
    if (prs_gpu_nvml_count(NULL, &count, &err) == 0)
        printf("NVML: %s, %u GPU%s\n", lib, count, count == 1 ? "" : "s");
    else
        printf("NVML: %s: %s\n", lib, err.msg);
    printf("LOCAL_RANK: %s; CUDA_VISIBLE_DEVICES: %s\n", env_or("LOCAL_RANK", "unset"),
           env_or("CUDA_VISIBLE_DEVICES", "unset"));
    char spec[PRS_GPU_SPEC_MAX];
    if (prs_gpu_rank_device(spec, sizeof spec, &err) == 0)
        printf("this rank's GPU: %s\n", spec);
    else
        printf("this rank's GPU: none (%s)\n", err.msg);
    char buf[160];
    const char *sock = prs_gpud_socket_path();
    printf("perseus-gpud: %s: %s\n", sock, gpud_state(sock, buf, sizeof buf));
}

static void show_clocks(prs_gpu *g)
{
    int n = 0, now = 0;
    if (prs_gpu_clocks(g, NULL, 0, &n) != 0 || n <= 0) {
        printf("  SM clocks: cannot be listed: %s\n", prs_gpu_errmsg(g));
        return;
    }
    int *c = malloc(sizeof *c * (size_t)n);
    if (c && prs_gpu_clocks(g, c, n, &n) == 0)
        printf("  SM clocks: %d supported, %d to %d MHz", n, c[n - 1], c[0]);
    free(c);
    if (prs_gpu_sm_clock_now(g, &now) == 0)
        printf("; now %d MHz\n", now);
    else
        printf("; now unknown (%s)\n", prs_gpu_errmsg(g));
}

static void show_gpu(const char *spec)
{
    prs_gpu *g;
    prs_error err = {0, ""};
    printf("GPU %s\n", spec);
    if (prs_gpu_open(spec, &g, &err) != 0) {
        printf("  cannot open: %s\n", err.msg);
        return;
    }
    char buf[64];
    printf("  name: %s (backend %s)\n", prs_gpu_name(g), prs_gpu_backend(g));
    printf("  uuid: %s\n", prs_gpu_uuid(g, buf, sizeof buf) == 0 ? buf : prs_gpu_errmsg(g));
    if (prs_gpu_pci_bus_id(g, buf, sizeof buf) == 0) printf("  pci: %s\n", buf);
    show_clocks(g);
    double e = prs_gpu_read_energy_j(g);
    if (isnan(e))
        printf("  energy counter: not readable (%s); power readings are used instead\n",
               prs_gpu_errmsg(g));
    else
        printf("  energy counter: readable, %.3f J so far\n", e);
    unsigned mw;
    if (prs_gpu_power_mw(g, &mw) == 0)
        printf("  power now: %.3f W\n", 1e-3 * mw);
    else
        printf("  power now: not readable (%s)\n", prs_gpu_errmsg(g));
    const prs_gpu_preset *p = NULL;
    if (strcmp(prs_gpu_backend(g), "sim") == 0 && strncmp(prs_gpu_name(g), "sim-", 4) == 0)
        p = prs_gpu_preset_find(prs_gpu_name(g) + 4);
    if (p)
        printf("  simulated: under perseus monitor it idles at its blocking power, %g W\n",
               p->blocking_power_w);
    prs_gpu_close(g);
}

int prs_cmd_show_env(int argc, char **argv)
{
    static const struct option opts[] = {
        {"gpus", required_argument, 0, 'g'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *list = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'g':
            list = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case ':':
            return prs_cli_usage_error("show-env", "missing value for", argv[optind - 1]);
        default:
            return prs_cli_unknown_option("show-env", argv[optind - 1], opts);
        }
    }
    if (optind < argc) return prs_cli_usage_error("show-env", "unexpected argument", argv[optind]);
    printf("perseus %s\n", PRS_VERSION);
    show_machine();
    char buf[4096];
    const char *specs[PRS_MONITOR_MAX_GPUS];
    int n = prs_cli_gpu_specs("show-env", list, buf, sizeof buf, specs, PRS_MONITOR_MAX_GPUS);
    if (n < 0) return list ? -n : 0; /* no GPU is a fact to show, not a failure */
    for (int i = 0; i < n; i++)
        show_gpu(specs[i]);
    return 0;
}
