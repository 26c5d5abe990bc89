/* The monotonic clock (include/perseus/clock.h). */
#include <time.h>

#include "perseus/clock.h"

double prs_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t prs_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int prs_sync_init_mono(pthread_mutex_t *mu, pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc) return rc;
    rc = pthread_mutex_init(mu, NULL);
    if (rc) pthread_cond_destroy(cv);
    return rc;
}

struct timespec prs_mono_timespec(double t)
{
    struct timespec ts = {0, 0};
    if (!(t > 0)) return ts; /* also NaN */
    ts.tv_sec = (time_t)t;
    long ns = (long)((t - (double)ts.tv_sec) * 1e9);
    ts.tv_nsec = ns < 0 ? 0 : ns > 999999999L ? 999999999L : ns;
    return ts;
}
