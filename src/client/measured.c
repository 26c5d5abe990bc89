/* prs_client_measured (perseus/client.h): what a measure-only client measured, per computation
 * kind and for the blocked time. On a device stream the powers come from the attribution fit over
 * the whole run (resolve.c), solved at the call; at the hooks, from the energies local.c summed.
 * (Measure-only mode: local.c.) */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client_int.h"

/* On a device stream: the powers from the fit (its message in c->errmsg when not usable). */
static void solve(prs_client *c, prs_client_kind *blocked)
{
    double pw[PRS__CLIENT_ATTRIB_MAX_KINDS], idle;
    prs__client_attrib_quality q;
    int rc = prs__client_dev_solve(c, pw, &idle, &q);
    snprintf(c->errmsg, sizeof c->errmsg, "%s", rc ? q.why : "");
    for (int k = 0; k < 2 * PRS_CLIENT_MAX_CHUNKS; k++) {
        c->measured[k].power_w = rc == PRS__CLIENT_ATTRIB_MORE && !q.rows ? NAN : pw[k];
        c->measured[k].power_se_w = q.rows ? q.kind_se_w[k] : NAN;
    }
    blocked->time_s = q.idle_s - q.lump_s; /* the tails (other_after_last) are other work */
    blocked->power_w = q.rows ? idle : NAN;
    blocked->power_se_w = q.rows ? q.idle_se_w : NAN;
}

int prs_client_measured(prs_client *c, prs_client_kind *kinds, int max, int *n,
                        prs_client_kind *blocked)
{
    if (!c || !n || max < 0 || (max > 0 && !kinds)) return PRS_EINVAL;
    *n = 0;
    if (!c->opts.measure_only) return PRS_EINVAL;
    prs_client_kind idle = {.chunk = -1, .instr = -1, .power_w = NAN, .power_se_w = NAN};
    if (c->dev) {
        prs__client_dev_poll(c, 0);
        solve(c, &idle);
    }
    pthread_mutex_lock(&c->mu);
    if (!c->dev) {
        for (int k = 0; k < 2 * PRS_CLIENT_MAX_CHUNKS; k++) {
            prs_client_kind *m = &c->measured[k];
            m->power_w = m->time_s > 0 ? c->measured_j[k] / m->time_s : NAN;
            m->power_se_w = 0;
        }
        idle.time_s = c->blocked_s;
        idle.power_w = c->blocked_s > 0 ? c->blocked_j / c->blocked_s : NAN;
        idle.power_se_w = 0;
    }
    for (int k = 0; k < 2 * PRS_CLIENT_MAX_CHUNKS; k++) {
        if (!c->measured[k].windows) continue;
        if (*n < max) kinds[*n] = c->measured[k];
        ++*n;
    }
    pthread_mutex_unlock(&c->mu);
    if (blocked) *blocked = idle;
    return 0;
}
