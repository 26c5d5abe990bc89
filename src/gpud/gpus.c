/* perseus-gpud device table: for each GPU its identity (index, UUID, PCI bus id), its supported
 * SM clocks, the clock the daemon locked, and who holds it; resetting a GPU's clocks. */
#include <stdlib.h>
#include <string.h>

#include "gpud.h"

int gpud_gpus_add(gpud *d, prs_gpu *g, int index, prs_error *err)
{
    if (d->ngpus >= GPUD_MAX_GPUS) {
        prs_gpu_close(g);
        return prs_error_set(err, PRS_ERANGE, "more than %d GPUs", GPUD_MAX_GPUS);
    }
    gpud_gpu *u = &d->gpus[d->ngpus];
    memset(u, 0, sizeof *u);
    u->g = g;
    u->index = index;
    if (prs_gpu_uuid(g, u->uuid, sizeof u->uuid)) {
        prs_error_set(err, PRS_EGPU, "GPU %d: no UUID: %s", index, prs_gpu_errmsg(g));
        prs_gpu_close(g);
        return PRS_EGPU;
    }
    if (prs_gpu_pci_bus_id(g, u->pci, sizeof u->pci)) snprintf(u->pci, sizeof u->pci, "-");
    int n = 0;
    if (prs_gpu_clocks(g, u->clocks, GPUD_MAX_CLOCKS, &n) || n <= 0) {
        prs_error_set(err, PRS_EGPU, "GPU %d (%s): no supported SM clocks: %s", index, u->uuid,
                      prs_gpu_errmsg(g));
        prs_gpu_close(g);
        return PRS_EGPU;
    }
    u->nclocks = n < GPUD_MAX_CLOCKS ? n : GPUD_MAX_CLOCKS;
    d->ngpus++;
    return 0;
}

int gpud_gpus_open_all(gpud *d, const char *lib_path, prs_error *err)
{
    unsigned n = 0;
    int rc = prs_gpu_nvml_count(lib_path, &n, err);
    if (rc) return rc;
    if (n > GPUD_MAX_GPUS) n = GPUD_MAX_GPUS;
    prs_error first = {0};
    for (unsigned i = 0; i < n; i++) {
        prs_gpu *g;
        rc = prs_gpu_open_nvml(i, lib_path, &g, err);
        if (!rc) rc = gpud_gpus_add(d, g, (int)i, err);
        if (!rc) continue;
        /* one GPU that cannot be served (MIG mode, fallen off the bus) must not keep the others
         * from being served, or from being reset after a crash */
        char q[160];
        gpud_log(GPUD_LOG_ERROR, "msg=gpu_not_served index=%u detail=%s", i,
                 gpud_logq(err->msg, q, sizeof q));
        if (!first.code) first = *err;
    }
    if (d->ngpus == 0 && first.code) {
        *err = first;
        return first.code;
    }
    return 0;
}

void gpud_gpus_close(gpud *d)
{
    for (int i = 0; i < d->ngpus; i++)
        prs_gpu_close(d->gpus[i].g);
    d->ngpus = 0;
}

gpud_gpu *gpud_gpu_find(gpud *d, const char *token)
{
    for (int i = 0; i < d->ngpus; i++)
        if (strcmp(d->gpus[i].uuid, token) == 0) return &d->gpus[i];
    if (!*token || strlen(token) > 4 || strspn(token, "0123456789") != strlen(token)) return NULL;
    int idx = atoi(token);
    for (int i = 0; i < d->ngpus; i++)
        if (d->gpus[i].index == idx) return &d->gpus[i];
    return NULL;
}

int gpud_gpu_supports(const gpud_gpu *u, int mhz)
{
    for (int i = 0; i < u->nclocks; i++)
        if (u->clocks[i] == mhz) return 1;
    return 0;
}

int gpud_gpu_reset(gpud_gpu *u, const char *why)
{
    char q[160];
    u->reset_msg[0] = '\0';
    int rc = prs_gpu_reset_clock(u->g);
    if (rc) {
        snprintf(u->reset_msg, sizeof u->reset_msg, "%s", prs_gpu_errmsg(u->g));
        gpud_log(GPUD_LOG_ERROR, "msg=reset_failed gpu=%s why=%s detail=%s", u->uuid,
                 gpud_logq(why, q, 80), gpud_logq(u->reset_msg, q + 80, 80));
    }
    u->locked_mhz = rc ? -1 : 0;
    int mrc = prs_gpu_reset_memory_clock(u->g);
    if (mrc && u->mem_locked) {
        if (!rc) snprintf(u->reset_msg, sizeof u->reset_msg, "%s", prs_gpu_errmsg(u->g));
        gpud_log(GPUD_LOG_ERROR, "msg=memory_reset_failed gpu=%s why=%s detail=%s", u->uuid,
                 gpud_logq(why, q, 80), gpud_logq(prs_gpu_errmsg(u->g), q + 80, 80));
    } else if (mrc) { /* never locked by us: nothing of ours to undo */
        gpud_log(GPUD_LOG_DEBUG, "msg=memory_reset_skipped gpu=%s detail=%s", u->uuid,
                 gpud_logq(prs_gpu_errmsg(u->g), q, sizeof q));
        mrc = 0;
    } else {
        u->mem_locked = 0;
    }
    u->dirty = rc || mrc;
    return rc ? rc : mrc;
}

void gpud_gpus_print(gpud *d, FILE *out)
{
    fprintf(out, "%-5s %-40s %-16s %-10s %-16s %-8s %-14s %-9s %s\n", "INDEX", "UUID", "PCI",
            "SM_MHZ", "SUPPORTED_MHZ", "CLOCKS", "ENERGY_MJ", "POWER_MW", "NAME");
    for (int i = 0; i < d->ngpus; i++) {
        gpud_gpu *u = &d->gpus[i];
        char range[32], sm[16] = "-", energy[24] = "-", power[16] = "-";
        snprintf(range, sizeof range, "%d-%d", u->clocks[u->nclocks - 1], u->clocks[0]);
        int f;
        uint64_t e;
        unsigned p;
        if (prs_gpu_sm_clock_now(u->g, &f) == 0) snprintf(sm, sizeof sm, "%d", f);
        if (prs_gpu_energy_mj(u->g, &e) == 0)
            snprintf(energy, sizeof energy, "%llu", (unsigned long long)e);
        if (prs_gpu_power_mw(u->g, &p) == 0) snprintf(power, sizeof power, "%u", p);
        fprintf(out, "%-5d %-40s %-16s %-10s %-16s %-8d %-14s %-9s %s\n", u->index, u->uuid, u->pci,
                sm, range, u->nclocks, energy, power, prs_gpu_name(u->g));
    }
}
