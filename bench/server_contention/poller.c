/* server_contention: the victim's poller: a thread that GETs V's schedule every 2 ms, and its
 * latencies. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "contention.h"

/* ---- the victim's poller ---- */

static void *poll_main(void *arg)
{
    poller *p = arg;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s/schedule?rank=0", p->v.id);
    int fd = -1;
    while (!p->stop && p->n < MAX_POLLS) {
        double t0 = sc_now_s();
        if (fd < 0) {
            fd = sc_connect_port(p->port);
            p->reconnects++;
        }
        reply r = fd >= 0 ? sc_request(fd, "GET", path, p->v.token, NULL, NULL, 0, 0)
                          : (reply){0, NULL, 1};
        p->lat_s[p->n++] = sc_now_s() - t0;
        if (r.status != 200) p->failed++;
        if (r.closed && fd >= 0) {
            close(fd);
            fd = -1;
        }
        free(r.body);
        sc_sleep_ms(POLL_EVERY_MS);
    }
    if (fd >= 0) close(fd);
    return NULL;
}

void sc_poller_start(poller *p)
{
    p->stop = 0;
    p->n = p->failed = p->reconnects = 0;
    if (pthread_create(&p->th, NULL, poll_main, p) != 0) sc_die("pthread_create");
}

void sc_poller_report(poller *p, const char *what)
{
    p->stop = 1;
    pthread_join(p->th, NULL);
    if (!p->n) {
        printf("  polls of V %s: none\n", what);
        return;
    }
    qsort(p->lat_s, (size_t)p->n, sizeof p->lat_s[0], sc_cmp_double);
    double p50 = p->lat_s[(int)(0.5 * (p->n - 1) + 0.5)];
    double p99 = p->lat_s[(int)(0.99 * (p->n - 1) + 0.5)], mx = p->lat_s[p->n - 1];
    printf("  polls of V %s: %d polls (%d failed), p50 %.2f ms, p99 %.2f ms, max %.2f ms  "
           "[goal p99 < %.0f ms, max < %.0f ms: %s]\n",
           what, p->n, p->failed, 1e3 * p50, 1e3 * p99, 1e3 * mx, GOAL_P99_MS, GOAL_MAX_MS,
           1e3 * p99 < GOAL_P99_MS && 1e3 * mx < GOAL_MAX_MS && !p->failed ? "met" : "MISSED");
}
