/* perseus-router: an OpenAI-compatible front for LLM serving instances that sends each request
 * to the pool of its DynamoLLM class and the instance that serves it with the least predicted
 * energy (docs/router.md). Parse the command line, load the configuration, serve until SIGINT
 * or SIGTERM. */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmdline.h"
#include "httpd.h"
#include "router.h"

static const char usage[] =
    "usage: perseus-router --config FILE [--listen HOST:PORT] [--port-file FILE] [--check]\n"
    "Route OpenAI-compatible requests to LLM serving instances by DynamoLLM's request classes.\n"
    "  --config FILE        pools and instances (JSON; format in docs/router.md)\n"
    "  --listen HOST:PORT   address (default 127.0.0.1:8080; port 0: a free one)\n"
    "  --port-file FILE     write the port to FILE once serving\n"
    "  --check              check the configuration, print its pools, and exit\n";

/* --check: one line per pool, its classes and its instances. */
static void print_pools(const prs_router_config *c)
{
    printf("model %s, cost model %s on %s\n", c->model, c->cost.llm->name, c->cost.gpu->name);
    for (int p = 0; p < c->npools; p++) {
        printf("pool %s: classes", c->pools[p].name);
        for (int k = 0; k < PRS_INFER_NCLASS; k++)
            if (c->pool_of_class[k] == p) printf(" %s", prs_infer_class_name(k));
        printf("; instances");
        for (int i = c->pools[p].first; i < c->pools[p].first + c->pools[p].n; i++)
            printf(" %s (tp %d, %d MHz, %s)", c->inst[i].name, c->inst[i].tp, c->inst[i].mhz,
                   c->inst[i].url);
        printf("\n");
    }
    if (c->report.url[0])
        printf("reports loads to %s, cluster %s, every %g s (rates divided by %g)\n", c->report.url,
               c->report.cluster, c->report.period_s, c->report.rate_scale);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", 1, NULL, 'c'},    {"listen", 1, NULL, 'l'},
                                         {"port-file", 1, NULL, 'p'}, {"check", 0, NULL, 'k'},
                                         {"version", 0, NULL, 'V'},   {"help", 0, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL, *listen = "127.0.0.1:8080", *port_file = NULL;
    int ch, check_only = 0;
    while ((ch = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            config = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'p':
            port_file = optarg;
            break;
        case 'k':
            check_only = 1;
            break;
        case 'V':
            puts("perseus-router " PRS_VERSION);
            return 0;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            return prs__cmdline_bad("perseus-router", opts, ch, argv);
        }
    }
    if (config == NULL || optind < argc) {
        fprintf(stderr, "perseus-router: %s\n",
                config ? "unexpected argument" : "--config FILE is required");
        return 2;
    }
    prs_error err = {0};
    prs_router_config cfg;
    if (prs__router_config_load(config, &cfg, &err) != 0) {
        fprintf(stderr, "perseus-router: %s\n", err.msg);
        return 2;
    }
    if (check_only) {
        print_pools(&cfg);
        prs__router_config_free(&cfg);
        return 0;
    }
    /* SIGINT and SIGTERM are blocked before any thread starts, so every thread inherits the
     * mask and only main's sigwait takes them: with a handler, the kernel could run it on another
     * thread and leave main in pause() for good. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    prs_router *r = NULL;
    int port = 0;
    if (prs__router_new(&cfg, &r, &err) != 0 || prs__router_listen(r, listen, &port, &err) != 0 ||
        (port_file && prs__httpd_write_port(port_file, port, &err) != 0)) {
        fprintf(stderr, "perseus-router: %s\n", err.msg);
        prs__router_free(r);
        prs__router_config_free(&cfg);
        curl_global_cleanup();
        return 1;
    }
    fprintf(stderr, "perseus-router: serving on port %d\n", port);
    int sig;
    sigwait(&stop_set, &sig);
    prs__router_free(r);
    curl_global_cleanup();
    return 0;
}
