/* The cluster's power budget (cluster_int.h; opts.power_cap_w): every policy runs under it.
 *
 * Two layers. Planning, at each instance period: the policy's clocks are checked against the
 * budget with the capacity table's power model (each active instance at its share of its pool's
 * recent peak rate, every other provisioned instance at its idle power); while the sum exceeds
 * the budget, clocks are lowered one step at a time, the step saving the most power first.
 * Holding, at every iteration: the load is burstier than the probes the table comes from, so
 * each active instance also gets a power limit, its idle power and an equal share per GPU of
 * what the budget leaves above the idle power of every provisioned GPU, and runs an iteration
 * that would draw more at a lower clock (engine.h), as a GPU under a power cap does. Clocks cannot
 * bring the idle power of provisioned GPUs down: only the policies that choose their instances
 * can, and they plan the cluster within the budget (policy.c). What the budget costs shows in the
 * latencies; what it fails to hold (a floor of idle power, or the lowest clock's) shows in the
 * measured power bins above it. */
#include <math.h>

#include "cluster_int.h"

double prs__infer_inst_power(const prs__infer_cluster *c, int i, int f)
{
    const prs__infer_inst *in = &c->inst[i];
    int mix = c->mix_of_pool[in->pool];
    const prs_infer_cap *cp = &c->caps->cap[mix][in->type][f];
    if (in->state != INST_ACTIVE) return cp->idle_w;
    return prs_infer_cap_power(cp, in->rate_rps);
}

static double predicted_w(const prs__infer_cluster *c, const int *want)
{
    double w = 0;
    for (int i = 0; i < c->n_inst; i++)
        w += prs__infer_inst_power(c, i, want ? want[i] : c->inst[i].clock);
    return w;
}

/* Every active instance's power limit: its idle power and an equal share per GPU of what the
 * budget leaves above the idle power of every provisioned GPU. */
static void set_limits(prs__infer_cluster *c)
{
    double idle = 0;
    int gpus = 0;
    for (int i = 0; i < c->n_inst; i++) {
        idle += c->caps->cap[c->mix_of_pool[c->inst[i].pool]][c->inst[i].type][0].idle_w;
        if (c->inst[i].state == INST_ACTIVE) gpus += c->caps->tps[c->inst[i].type];
    }
    double spare = c->o->power_cap_w - idle;
    for (int i = 0; i < c->n_inst; i++) {
        const prs__infer_inst *in = &c->inst[i];
        if (in->state != INST_ACTIVE) continue;
        double own = c->caps->cap[c->mix_of_pool[in->pool]][in->type][0].idle_w;
        double share = spare > 0 && gpus > 0 ? spare * c->caps->tps[in->type] / gpus : 0;
        prs_infer_engine_set_power_limit(in->e, own + share);
    }
}

void prs__infer_powercap_fit(prs__infer_cluster *c, int *want)
{
    double cap = c->o->power_cap_w;
    if (!(cap > 0)) return;
    double total = predicted_w(c, want);
    while (total > cap) {
        int best = -1;
        double best_save = 0;
        for (int i = 0; i < c->n_inst; i++) {
            if (c->inst[i].state != INST_ACTIVE || want[i] == 0) continue;
            double save =
                prs__infer_inst_power(c, i, want[i]) - prs__infer_inst_power(c, i, want[i] - 1);
            if (best < 0 || save > best_save) {
                best = i;
                best_save = save;
            }
        }
        if (best < 0 || !(best_save > 0)) {
            c->res->cap_unmet++;
            break;
        }
        want[best]--;
        total -= best_save;
        c->res->cap_lowered++;
    }
    set_limits(c);
}

int prs__infer_powercap_room(const prs__infer_cluster *c, int i, int f)
{
    double cap = c->o->power_cap_w;
    if (!(cap > 0)) return 1;
    double w = predicted_w(c, NULL) - prs__infer_inst_power(c, i, c->inst[i].clock) +
               prs__infer_inst_power(c, i, f);
    return w <= cap;
}

void prs__infer_powercap_account(prs__infer_cluster *c, double end_s)
{
    double cap = c->o->power_cap_w;
    const prs_infer_meter *m = &c->res->meter;
    if (!(cap > 0)) return;
    for (size_t k = 0; k < m->n && (double)k * m->bin_s < end_s; k++) {
        double w = m->energy_j[k] / m->bin_s;
        if (w <= cap * (1 + 1e-9)) continue; /* at the budget, to rounding */
        c->res->over_cap_s += m->bin_s;
        c->res->over_cap_max_w = fmax(c->res->over_cap_max_w, w - cap);
    }
}
