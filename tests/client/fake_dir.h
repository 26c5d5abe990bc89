/* Shared by the tests of the fake GPU and of device streams (test_fake_gpu.c, test_stream.c): the
 * wall clock, sleeping, and a fresh $PRS_FAKE_GPU_DIR for one test. Header-only. */
#ifndef PRS_TEST_FAKE_DIR_H
#define PRS_TEST_FAKE_DIR_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Make dir (n bytes) a new directory named after tag and point $PRS_FAKE_GPU_DIR at it; 0, or -1
 * when it cannot be made. */
static inline int fake_dir_begin(char *dir, size_t n, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, n, "%s/prs-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(dir)) return -1;
    setenv("PRS_FAKE_GPU_DIR", dir, 1);
    return 0;
}

/* Remove the device files of up to `devices` devices and the directory. */
static inline void fake_dir_end(const char *dir, int devices)
{
    char p[320];
    for (int i = 0; i < devices; i++) {
        snprintf(p, sizeof p, "%s/gpu%d.state", dir, i);
        unlink(p);
    }
    rmdir(dir);
    unsetenv("PRS_FAKE_GPU_DIR");
}

#endif
