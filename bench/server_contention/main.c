/* server_contention: what one client's heavy requests cost the clients of other jobs on perseusd.
 *
 * Runs the real perseusd (--perseusd PATH) as a child on a loopback port with a scratch data
 * directory. A victim job V (two stages, one registered rank, so it stays registering) is polled
 * (GET /schedule) every 2 ms on one keep-alive connection by a thread of its own while a scenario
 * runs; the polls' p50, p99 and maximum are printed with the scenario's own figures:
 *
 *   delete-big   DELETE of a job whose store holds 1,000 measurements of 1,000 windows each
 *                (1 M windows): the answer's time, and the time until its rows are gone
 *   delete-fk    DELETE of a job of 1,000 measurements while another job holds 300,000 windows
 *   retention    60 finished jobs of 10,000 windows each expire (--retention 2s)
 *   results      a client posts ~1 MB results bodies to another job in a loop for 2 s
 *   upload       a 15 MB profile uploaded to another job while 20 jobs are created
 *   step         results posts just under and over 64 KiB, alone: their answer times (a large
 *                body is handed to a pool of threads, and its answer used to wait 100 ms more)
 *   unauth       200 connections post 16 MiB (profile) or 1 MiB (results) to job routes without
 *                a token, half to an existing job, half to an unknown one: the server's
 *                RSS growth (peak VmRSS over the run minus VmRSS before), and how many were
 *                answered before their body was sent
 *   flood        10,000 idle connections from 10 addresses (--max-connections 8192, 1,000 from
 *                each address, under --max-client-connections), held by the server: new
 *                clients' answers (status, time: a 503 at once is the goal) and the server's
 *                error-level log lines
 *
 * The large stores are written straight into the database (sqlite3) while the server is stopped,
 * then the server is started again on it: filling 1 M windows over HTTP would take minutes. The
 * program is a report, not a test: it exits 0 when every scenario ran, whatever the figures (the
 * goal, p99 < 20 ms and max < 200 ms, is printed next to them).
 *
 * Files: main.c picks the scenarios; server.c runs perseusd and a scenario's frame, http.c
 * makes the requests, poller.c polls the victim, store.c fills the store; delete.c, posts.c,
 * upload.c and conns.c are the scenarios. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contention.h"

int main(int argc, char **argv)
{
    const char *bin = "./build/perseusd", *only = "all";
    int nidle = 10000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--perseusd") == 0 && i + 1 < argc)
            bin = argv[++i];
        else if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--flood") == 0 && i + 1 < argc)
            nidle = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: server_contention [--perseusd PATH] [--scenario NAME|all] "
                            "[--flood N]\nscenarios: delete-big delete-fk retention results upload "
                            "unauth step flood\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    printf("server_contention: %s\n", bin);
    struct {
        const char *name;
        void (*fn)(const char *bin);
    } sc[] = {{"delete-big", sc_scenario_delete_big},
              {"delete-fk", sc_scenario_delete_fk},
              {"retention", sc_scenario_retention},
              {"results", sc_scenario_results},
              {"upload", sc_scenario_upload},
              {"unauth", sc_scenario_unauth},
              {"step", sc_scenario_step}};
    int ran = 0;
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        if (strcmp(only, "all") == 0 || strcmp(only, sc[i].name) == 0) {
            sc[i].fn(bin);
            ran++;
        }
    if (strcmp(only, "all") == 0 || strcmp(only, "flood") == 0) {
        sc_scenario_flood(bin, nidle);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "server_contention: no scenario named %s\n", only);
        return 2;
    }
    return 0;
}
