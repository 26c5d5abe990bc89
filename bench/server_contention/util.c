/* server_contention: small helpers: the monotonic clock, pauses, fatal errors, readings of /proc
 * and of the server's log. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contention.h"

double sc_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sc_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void sc_die(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "server_contention: %s\n", msg);
    exit(1);
}

/* A field of /proc/PID/status in kB (VmRSS, VmHWM), -1 when unreadable. */
long sc_proc_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') kb = atol(line + n + 1);
    if (f) fclose(f);
    return kb;
}

/* Open descriptors of a process (-1: unreadable). */
long sc_count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    long n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 2;
}

/* Lines of a file holding needle; the first `show` of them are printed. */
long sc_count_lines(const char *path, const char *needle, int show)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    long n = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, needle) && n++ < show) printf("    %s", line);
    if (f) fclose(f);
    return n;
}

int sc_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
