/* Tests: start and stop a real perseus-gpud ($PRS_BIN_DIR/perseus-gpud) on a temporary socket
 * and state directory, over the fake NVML ($PRS_FAKE_NVML). The daemon is forked and exec'd
 * before the caller changes its own environment, so a test can then play the unprivileged
 * trainer (PRS_FAKE_NVML_DENY=1) while the daemon stays the privileged process. Header-only. */
#ifndef PRS_TEST_GPUD_HARNESS_H
#define PRS_TEST_GPUD_HARNESS_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct gpud_harness {
    char dir[256], sock[300], state[300], conf[300], log[300], bin[512];
    pid_t pid;
} gpud_harness;

static inline void gpud_nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Paths under a new temporary directory; the config allows config_text (NULL: root only). 0, or
 * -1 when there is no daemon binary or directory. */
static inline int gpud_harness_init(gpud_harness *h, const char *config_text)
{
    memset(h, 0, sizeof *h);
    const char *bin = getenv("PRS_BIN_DIR");
    if (!bin) return -1;
    snprintf(h->bin, sizeof h->bin, "%s/perseus-gpud", bin);
    if (access(h->bin, X_OK) != 0) return -1;
    snprintf(h->dir, sizeof h->dir, "%s/prs-gpud-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(h->dir)) return -1;
    snprintf(h->sock, sizeof h->sock, "%s/gpud.sock", h->dir);
    snprintf(h->state, sizeof h->state, "%s/state", h->dir);
    snprintf(h->conf, sizeof h->conf, "%s/gpud.conf", h->dir);
    snprintf(h->log, sizeof h->log, "%s/gpud.log", h->dir);
    FILE *f = fopen(h->conf, "w");
    if (!f) return -1;
    fputs(config_text ? config_text : "# root only\n", f);
    fclose(f);
    return 0;
}

static inline int gpud_harness_connectable(const gpud_harness *h)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(h->sock) >= sizeof a.sun_path) return 0;
    memcpy(a.sun_path, h->sock, strlen(h->sock) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Start the daemon on the NVML library lib (its environment is ours, without
 * PRS_FAKE_NVML_DENY); wait (at most 5 s) until it accepts. 0, or -1. */
static inline int gpud_harness_start(gpud_harness *h, const char *lib)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        unsetenv("PRS_FAKE_NVML_DENY");
        execl(h->bin, h->bin, "--socket", h->sock, "--state-dir", h->state, "--config", h->conf,
              "--nvml-library", lib, "--log-level", "debug", (char *)NULL);
        _exit(127);
    }
    h->pid = pid;
    for (int i = 0; i < 3000; i++) { /* 30 s */
        if (gpud_harness_connectable(h)) return 0;
        gpud_nap_ms(10); /* poll interval */
    }
    return -1;
}

/* Signal the daemon and reap it. */
static inline void gpud_harness_stop(gpud_harness *h, int sig)
{
    if (h->pid <= 0) return;
    kill(h->pid, sig);
    waitpid(h->pid, NULL, 0);
    h->pid = 0;
}

/* Stop (SIGTERM) and remove the directory. */
static inline void gpud_harness_fini(gpud_harness *h)
{
    gpud_harness_stop(h, SIGTERM);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", h->dir);
    if (h->dir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", h->dir);
}

#endif
