/* sse_backend: a serving instance for measuring perseus-router (bench/lib/sse_serve.h): every
 * completion answered with max_tokens events, the first after --ttft-ms, the next --gap-ms
 * apart, from one epoll thread that holds tens of thousands of streams. Runs until SIGINT or
 * SIGTERM, then prints its counts on stderr.
 *
 *   sse_backend [--port N] [--port-file FILE] [--ttft-ms MS] [--gap-ms MS]
 *               [--default-tokens N] [--max-conns N]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/sse_serve.h"

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", 1, NULL, 'p'},   {"port-file", 1, NULL, 'f'},      {"ttft-ms", 1, NULL, 't'},
        {"gap-ms", 1, NULL, 'g'}, {"default-tokens", 1, NULL, 'n'}, {"max-conns", 1, NULL, 'm'},
        {NULL, 0, NULL, 0}};
    sse_serve_opts o = {.ttft_s = 0.05, .gap_s = 0.02, .default_tokens = 16, .max_conns = 60000};
    int port = 0, ch;
    const char *port_file = NULL;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'f':
            port_file = optarg;
            break;
        case 't':
            o.ttft_s = atof(optarg) * 1e-3;
            break;
        case 'g':
            o.gap_s = atof(optarg) * 1e-3;
            break;
        case 'n':
            o.default_tokens = atol(optarg);
            break;
        case 'm':
            o.max_conns = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: sse_backend [--port N] [--port-file FILE] [--ttft-ms MS] "
                            "[--gap-ms MS] [--default-tokens N] [--max-conns N]\n");
            return 2;
        }
    }
    if (!(o.ttft_s >= 0) || !(o.gap_s >= 0) || o.default_tokens < 1 || o.max_conns < 1) {
        fprintf(stderr, "sse_backend: bad option value\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)o.max_conns + 16)
            o.max_conns = (int)rl.rlim_cur - 16;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sse_serve *s;
    if (sse_serve_start(port, &o, &s, &port) != 0) {
        perror("sse_backend: cannot listen");
        return 1;
    }
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (f == NULL) return 1;
        fprintf(f, "%d\n", port);
        fclose(f);
    }
    fprintf(stderr, "sse_backend: serving on port %d (at most %d connections)\n", port,
            o.max_conns);
    while (!stop_flag)
        pause();
    fprintf(stderr, "sse_backend: %ld requests, %ld streams abandoned by their client\n",
            sse_serve_requests(s), sse_serve_abandoned(s));
    sse_serve_stop(s);
    return 0;
}
