/* The child processes of perseus demo --inference (demo_infer.h). Each is started from the
 * directory of the perseus binary with its stderr in the demo's temporary directory, and asks
 * the kernel for SIGTERM when the demo dies (PR_SET_PDEATHSIG), so that even a kill -9 of the
 * demo leaves nothing running. Stopping is SIGTERM and a wait with a deadline, then SIGKILL. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "demo_infer.h"

volatile sig_atomic_t prs_demo_stop;

static void on_signal(int sig)
{
    (void)sig;
    prs_demo_stop = 1;
}

void demo_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

double demo_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void demo_sleep(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

int demo_find_programs(demo_procs *ps)
{
    static const char *const progs[] = {"perseusd", "perseus-router", "perseus-fakeserve",
                                        "perseus-instclock"};
    char self[1024];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
        fprintf(stderr, DEMO_CMD ": cannot find the perseus binary (/proc/self/exe)\n");
        return 1;
    }
    self[k] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    snprintf(ps->bindir, sizeof ps->bindir, "%s", self[0] ? self : "/");
    for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", ps->bindir, progs[i]);
        if (access(path, X_OK) != 0) {
            fprintf(stderr,
                    DEMO_CMD ": %s not found: the demo runs the programs installed next to "
                             "perseus (%s)\n",
                    path, ps->bindir);
            return 1;
        }
    }
    return 0;
}

/* In the child: stderr to the log, stdout to /dev/null, the death signal, then exec. */
static void exec_child(const demo_procs *ps, const char *name, const char *prog, char *const argv[],
                       char *const env[], pid_t parent)
{
    char path[1100], log[700];
    snprintf(log, sizeof log, "%s/%s.log", ps->tmp, name);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0 || nul < 0) _exit(127);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(fd, 2);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
    if (getppid() != parent) _exit(127); /* the demo died before the line above */
    signal(SIGPIPE, SIG_DFL);
    /* a group of its own: Ctrl-C on the terminal reaches the demo only, which stops its children
     * itself, in order */
    setpgid(0, 0);
    for (char *const *e = env; e && *e; e++)
        putenv(*e);
    snprintf(path, sizeof path, "%s/%s", ps->bindir, prog);
    execv(path, argv);
    fprintf(stderr, "cannot run %s: %s\n", path, strerror(errno));
    _exit(127);
}

int demo_spawn(demo_procs *ps, const char *name, const char *prog, char *const argv[],
               char *const env[])
{
    if (ps->n == DEMO_MAX_PROCS) return -1;
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        fprintf(stderr, DEMO_CMD ": cannot start %s: %s\n", prog, strerror(errno));
        return -1;
    }
    if (pid == 0) exec_child(ps, name, prog, argv, env, parent);
    demo_proc *p = &ps->p[ps->n];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->pid = pid;
    return ps->n++;
}

/* The last line of the child's log, for messages. */
static void log_tail(const demo_procs *ps, int idx, char *buf, size_t n)
{
    char path[700], line[512];
    snprintf(path, sizeof path, "%s/%s.log", ps->tmp, ps->p[idx].name);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (line[0] != '\n') snprintf(buf, n, "%s", line);
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

int demo_wait_port(demo_procs *ps, int idx, const char *file, double timeout_s)
{
    char path[700], why[512];
    snprintf(path, sizeof path, "%s/%s", ps->tmp, file);
    for (double end = demo_now() + timeout_s; !prs_demo_stop && demo_now() < end;
         demo_sleep(0.01)) {
        FILE *f = fopen(path, "r");
        int port = 0;
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = 0;
            fclose(f);
        }
        if (port > 0) return port;
        int st;
        if (waitpid(ps->p[idx].pid, &st, WNOHANG) == ps->p[idx].pid) {
            ps->p[idx].pid = 0;
            log_tail(ps, idx, why, sizeof why);
            fprintf(stderr, DEMO_CMD ": %s exited at start: %s\n", ps->p[idx].name, why);
            return -1;
        }
    }
    if (!prs_demo_stop)
        fprintf(stderr, DEMO_CMD ": %s did not start within %.0f s\n", ps->p[idx].name, timeout_s);
    return -1;
}

int demo_stop(demo_procs *ps, int idx, double timeout_s)
{
    demo_proc *p = &ps->p[idx];
    if (p->pid <= 0) return -1;
    kill(p->pid, SIGTERM);
    int st = 0;
    pid_t got = 0;
    for (double end = demo_now() + timeout_s; (got = waitpid(p->pid, &st, WNOHANG)) == 0;
         demo_sleep(0.005))
        if (demo_now() > end) {
            fprintf(stderr, DEMO_CMD ": %s did not stop within %.0f s: killed\n", p->name,
                    timeout_s);
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            got = -1;
            break;
        }
    p->pid = 0;
    return got > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

void demo_stop_all(demo_procs *ps)
{
    for (int i = ps->n - 1; i >= 0; i--)
        if (ps->p[i].pid > 0) demo_stop(ps, i, 10);
}
