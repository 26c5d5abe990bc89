/* Measure-only mode (perseus/client.h, opts.measure_only; docs/measurement.md, 'Measure only'):
 * the client without a server and without a clock controller, for whoever wants the profile of
 * a training loop at the clock its GPU runs, changing nothing.
 *
 * The schedule is local and fixed: one profiling round (round 0) with no clocks, no quota and no
 * pipeline geometry, so the hooks are not checked against an order and no clock is ever asked
 * for. The measurement paths are the usual ones (measure.c at the hooks, devtime.c and resolve.c
 * on a device stream: one attribution fit for the whole run, kind = chunk * 2 + instruction);
 * each window is tagged with the SM clock read at its iteration's start (at its begin when
 * measured at the hooks). Nothing queues for a server: on a device stream every iteration past
 * the warm-up goes to one attribution fit, solved when prs_client_measured is called (the warm-up
 * iterations are unknown time to it); at the hooks the reported windows are summed per kind.
 * This file keeps the counts as they come; measured.c answers prs_client_measured from them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"

void prs__client_local_init(prs_client *c)
{
    memset(&c->cur, 0, sizeof c->cur);
    snprintf(c->cur.phase, sizeof c->cur.phase, "profiling");
    c->cur.plan_id = -1;
    c->cur.from_iteration = -1;
    memcpy(c->stats.phase, c->cur.phase, sizeof c->stats.phase);
}

/* What start_controller learns of the GPU, without a controller. */
int prs__client_local_gpu(prs_client *c)
{
    int n = 0, top = 0;
    if (prs_gpu_clocks(c->gpu, &top, 1, &n) == 0 && n > 0) c->f_max_mhz = top;
    c->gpu_exact = strcmp(prs_gpu_backend(c->gpu), "sim") == 0;
    return 0;
}

int prs__client_default_clock(const prs_client *c)
{
    return c->gpu_exact ? c->f_max_mhz : -1;
}

int prs__client_local_clock(prs_client *c)
{
    int mhz = 0;
    return prs_gpu_sm_clock_now(c->gpu, &mhz) == 0 && mhz > 0 ? mhz : -1;
}

static void count(prs_client_kind *k, int chunk, int instr, int clock_mhz, double time_s)
{
    if (!k->windows || clock_mhz < k->clock_min_mhz) k->clock_min_mhz = clock_mhz;
    if (!k->windows || clock_mhz > k->clock_max_mhz) k->clock_max_mhz = clock_mhz;
    k->chunk = chunk;
    k->instr = instr;
    k->windows++;
    k->time_s += time_s;
}

void prs__client_local_add(prs_client *c, const prs__client_iteration *it)
{
    double outside_s = it->time_s;
    for (int i = 0; i < it->n_windows; i++) {
        const prs__client_window *w = &it->windows[i];
        outside_s -= w->time_s;
        if (w->chunk < 0 || w->chunk >= PRS_CLIENT_MAX_CHUNKS) continue;
        count(&c->measured[w->chunk * 2 + (int)w->instr], w->chunk, (int)w->instr, w->clock_mhz,
              w->time_s);
        c->measured_j[w->chunk * 2 + (int)w->instr] += w->energy_j;
    }
    if (it->n_windows > 0) c->stats.posted++;
    if (it->blocking_power_w > 0 && it->n_windows > 0 && outside_s > 0) {
        c->blocked_s += outside_s;
        c->blocked_j += outside_s * it->blocking_power_w;
    }
}

void prs__client_local_count(prs_client *c, int kind, int clock_mhz, double time_s)
{
    if (kind < 0 || kind >= 2 * PRS_CLIENT_MAX_CHUNKS) return;
    pthread_mutex_lock(&c->mu);
    count(&c->measured[kind], kind / 2, kind % 2, clock_mhz, time_s);
    pthread_mutex_unlock(&c->mu);
}

void prs__client_local_iteration(prs_client *c)
{
    pthread_mutex_lock(&c->mu);
    c->stats.posted++;
    pthread_mutex_unlock(&c->mu);
}
