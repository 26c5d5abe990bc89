/* load_server: perseusd as a child process: started on a scratch directory and stopped, its CPU
 * time, and the figures of its /metrics. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "load_server.h"

double ls_cpu_s(const struct rusage *u)
{
    return (double)u->ru_utime.tv_sec + 1e-6 * (double)u->ru_utime.tv_usec +
           (double)u->ru_stime.tv_sec + 1e-6 * (double)u->ru_stime.tv_usec;
}

/* CPU seconds (user + system) the server has used so far; NAN when unknown. */
double ls_server_cpu_s(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')'); /* the command name may hold spaces */
    unsigned long ut, st;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

void ls_cpu_mark_now(pid_t pid, cpu_mark *m)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    m->gen = ls_cpu_s(&u);
    m->srv = ls_server_cpu_s(pid);
    m->wall = ls_now_s();
}

/* "generator X%, perseusd Y%" of one core between two marks. */
void ls_print_cpu(const cpu_mark *a, const cpu_mark *b)
{
    double w = b->wall - a->wall;
    if (w <= 0) return;
    printf("cpu: generator %.0f%%, perseusd %.0f%% of a core", 100 * (b->gen - a->gen) / w,
           100 * (b->srv - a->srv) / w);
}

/* ---- server ---- */

int ls_start_server(gen *g, const char *bin)
{
    snprintf(g->dir, sizeof g->dir, "/tmp/prs-load-XXXXXX");
    if (!mkdtemp(g->dir)) {
        fprintf(stderr, "load_server: cannot make a scratch directory: %s\n", strerror(errno));
        g->dir[0] = '\0';
        return -1;
    }
    char port_file[128], threads_s[16];
    snprintf(port_file, sizeof port_file, "%s/port", g->dir);
    /* 0: perseusd's default (one worker per online CPU) */
    snprintf(threads_s, sizeof threads_s, "%d", g->threads);
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "load_server: %s: %s (build perseusd, or give --perseusd PATH)\n", bin,
                strerror(errno));
        return -1;
    }
    g->pid = fork();
    if (g->pid < 0) {
        fprintf(stderr, "load_server: fork: %s\n", strerror(errno));
        return -1;
    }
    if (g->pid == 0) {
        /* Every simulated rank shares one address: lift the per-client connection cap. */
        if (g->threads > 0)
            execl(bin, "perseusd", "--listen", "127.0.0.1:0", "--data-dir", g->dir, "--port-file",
                  port_file, "--log-level", "error", "--threads", threads_s,
                  "--max-client-connections", "8192", (char *)NULL);
        else
            execl(bin, "perseusd", "--listen", "127.0.0.1:0", "--data-dir", g->dir, "--port-file",
                  port_file, "--log-level", "error", "--max-client-connections", "8192",
                  (char *)NULL);
        fprintf(stderr, "load_server: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    g_child = g->pid;
    double t0 = ls_now_s();
    while (ls_now_s() - t0 < 15 && !g->port && !g_stop) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            if (fscanf(f, "%d", &g->port) != 1) g->port = 0;
            fclose(f);
        }
        int status;
        if (!g->port && waitpid(g->pid, &status, WNOHANG) == g->pid) {
            fprintf(stderr, "load_server: %s exited before serving (status %d)\n", bin, status);
            g->pid = 0;
            return -1;
        }
        if (!g->port) usleep(20000);
    }
    if (g->port < 1 || g->port > 65535) {
        fprintf(stderr, "load_server: %s did not write a port to %s in 15 s\n", bin, port_file);
        return -1;
    }
    return 0;
}

void ls_stop_server(gen *g)
{
    if (g->pid > 0) {
        kill(g->pid, SIGTERM);
        int status = 0;
        double t0 = ls_now_s();
        pid_t w;
        while ((w = waitpid(g->pid, &status, WNOHANG)) == 0 && ls_now_s() - t0 < 20)
            usleep(10000);
        if (w == 0) {
            fputs("load_server: perseusd did not stop on SIGTERM in 20 s; killing it\n", stderr);
            kill(g->pid, SIGKILL);
            waitpid(g->pid, &status, 0);
        } else if (w == g->pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            fprintf(stderr, "load_server: perseusd stopped with status %d\n", status);
        }
        g->pid = 0;
        g_child = 0;
    }
    if (g->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g->dir);
        if (system(cmd) != 0) fprintf(stderr, "load_server: could not remove %s\n", g->dir);
        g->dir[0] = '\0';
    }
}

/* The server's own total time answering a route, from its /metrics (seconds; -1: no answer). */
double ls_server_route_s(gen *g, const char *route)
{
    if (ls_ctl(g, M_GET, NULL, NULL, ls_now_s() + DEADLINE_CHECK_S, "/metrics") != 200) return -1;
    char key[128];
    snprintf(key, sizeof key, "perseusd_http_request_duration_seconds_sum{route=\"%s\"} ", route);
    const char *at = g->ctl.resp.p ? strstr(g->ctl.resp.p, key) : NULL;
    return at ? strtod(at + strlen(key), NULL) : 0; /* a route not used yet has no series */
}

/* The server's own latency histogram of schedule requests (GET /metrics): cumulative counts per
 * bucket bound. Returns the number of buckets read (0 on failure). */
int ls_server_hist(gen *g, double *le, unsigned long long *cum)
{
    if (ls_ctl(g, M_GET, NULL, NULL, ls_now_s() + DEADLINE_CHECK_S, "/metrics") != 200) return 0;
    const char *key = "perseusd_http_request_duration_seconds_bucket{route=\"schedule\",le=\"";
    int n = 0;
    for (const char *p = g->ctl.resp.p; p && n < MAX_BUCKETS && (p = strstr(p, key));) {
        p += strlen(key);
        char *end;
        le[n] = strncmp(p, "+Inf", 4) == 0 ? INFINITY : strtod(p, &end);
        const char *v = strstr(p, "} ");
        if (!v) break;
        cum[n++] = strtoull(v + 2, NULL, 10);
        p = v;
    }
    return n;
}

/* Smallest bucket bound under which a fraction q of the requests between two histograms fall. */
double ls_hist_quantile(int n, const double *le, const unsigned long long *a,
                        const unsigned long long *b, double q, unsigned long long *count)
{
    *count = n ? b[n - 1] - a[n - 1] : 0;
    for (int i = 0; i < n; i++)
        if ((double)(b[i] - a[i]) >= q * (double)*count) return le[i];
    return INFINITY;
}
