/* perseus demo --inference --compare (demo_infer_int.h): both runs predicted by the emulator
 * (`perseus infer emulate --cluster`, cli_fixed.h) on the configuration the router ran with and
 * the same slice of the trace, every instance at the highest clock, then under the instance
 * level deciding every second of the trace as the controllers did, with their headroom; printed
 * beside the live figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_fixed.h"
#include "demo_infer_int.h"

int demo_predict(demo_state *st)
{
    char path[600];
    snprintf(path, sizeof path, "%s/router.json", st->ps.tmp);
    prs_router_config cfg = {0};
    prs_error err = {0};
    prs_infer_fixed_result *r = calloc(1, sizeof *r);
    int rc = r ? prs__router_config_load(path, &cfg, &err) : PRS_ENOMEM;
    for (int k = 0; k < 2 && !rc; k++) {
        prs_cli_fixed o;
        prs_cli_fixed_default(&o);
        o.headroom = st->a.headroom;
        o.instance_period_s = k ? 1 : 0; /* the controllers' period: a second of the trace */
        rc = prs_cli_fixed_run(&cfg, &st->trace, &o, r, &err);
        st->pred_slo_pct[k] = prs_cli_fixed_slo_pct(r);
        st->pred_energy_j[k] = r->energy_j;
    }
    if (rc) fprintf(stderr, DEMO_CMD ": --compare: %s\n", r ? err.msg : "out of memory");
    st->predicted = !rc;
    prs__router_config_free(&cfg);
    free(r);
    return rc != 0;
}

static double live_slo_pct(const demo_run *run)
{
    long met = 0, sent = 0;
    for (int p = 0; p < DEMO_NPOOLS; p++) {
        met += run->pool[p].met;
        sent += run->pool[p].sent;
    }
    return sent ? 100.0 * (double)met / (double)sent : NAN;
}

void demo_print_compare(const demo_state *st)
{
    char a[2][32];
    printf("predicted by perseus infer emulate --cluster (the router's configuration, the same "
           "slice):\n");
    for (int k = 0; k < 2; k++)
        snprintf(a[k], sizeof a[k], "%.2f %%", st->pred_slo_pct[k]);
    printf("%-30s %15s %15s\n", "  SLO attainment, predicted", a[0], a[1]);
    for (int k = 0; k < 2; k++)
        snprintf(a[k], sizeof a[k], "%.2f %%", live_slo_pct(&st->run[k]));
    printf("%-30s %15s %15s\n", "  SLO attainment, live", a[0], a[1]);
    for (int k = 0; k < 2; k++)
        snprintf(a[k], sizeof a[k], "%+.2f", live_slo_pct(&st->run[k]) - st->pred_slo_pct[k]);
    printf("%-30s %15s %15s\n", "  live - predicted (points)", a[0], a[1]);
    for (int k = 0; k < 2; k++)
        snprintf(a[k], sizeof a[k], "%.1f", st->pred_energy_j[k] / 1e3);
    printf("%-30s %15s %15s\n", "  energy predicted (kJ)", a[0], a[1]);
    for (int k = 0; k < 2; k++)
        snprintf(a[k], sizeof a[k], "%.1f", st->energy_j[k] / 1e3);
    printf("%-30s %15s %15s\n", "  energy live (kJ)", a[0], a[1]);
    for (int k = 0; k < 2; k++)
        snprintf(a[k], sizeof a[k], "%+.2f %%", 100 * (st->energy_j[k] / st->pred_energy_j[k] - 1));
    printf("%-30s %15s %15s\n", "  live / predicted energy", a[0], a[1]);
}
