/* server_contention: perseusd as a child on a scratch data directory, and the frame every scenario
 * runs in (the server and a victim job V). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contention.h"

/* ---- the server ---- */

void sc_server_start(server *s, const char *const *extra)
{
    char port_file[300];
    snprintf(port_file, sizeof port_file, "%s/port", s->dir);
    unlink(port_file);
    const char *argv[40] = {"perseusd", "--listen",    "127.0.0.1:0", "--data-dir",  s->dir, "--db",
                            s->db,      "--port-file", port_file,     "--log-level", "warn"};
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 38; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    s->pid = fork();
    if (s->pid < 0) sc_die("fork: %s", strerror(errno));
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) dup2(fd, 2);
        execv(s->bin, (char *const *)argv);
        _exit(127);
    }
    for (double t0 = sc_now_s(); sc_now_s() - t0 < 120; sc_sleep_ms(20)) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &s->port) == 1;
            fclose(f);
            if (ok && s->port > 0) return;
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) sc_die("%s exited at start", s->bin);
    }
    sc_die("%s did not start within 120 s", s->bin);
}

void sc_server_stop(server *s)
{
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    for (double t0 = sc_now_s(); sc_now_s() - t0 < 60; sc_sleep_ms(10))
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/* ---- scenarios ---- */

void sc_bench_begin(bench *b, const char *bin, const char *tag, const char *const *extra)
{
    memset(&b->s, 0, sizeof b->s);
    b->s.bin = bin;
    const char *base = getenv("TMPDIR");
    snprintf(b->s.dir, sizeof b->s.dir, "%s/prs-contention-%s-XXXXXX",
             base && *base ? base : "/tmp", tag);
    if (!mkdtemp(b->s.dir)) sc_die("mkdtemp: %s", strerror(errno));
    snprintf(b->s.db, sizeof b->s.db, "%s/perseusd.db", b->s.dir);
    snprintf(b->s.log, sizeof b->s.log, "%s/perseusd.log", b->s.dir);
    sc_server_start(&b->s, extra);
}

void sc_bench_victim(bench *b, const char *create_token)
{
    sc_create_job(b->s.port, create_token, 2, 4, &b->v);
    sc_register_rank0(b->s.port, &b->v);
    b->p.v = b->v;
    b->p.port = b->s.port;
}

void sc_bench_end(bench *b)
{
    sc_server_stop(&b->s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", b->s.dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", b->s.dir);
}
