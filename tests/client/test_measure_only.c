/* The client's measure-only mode (perseus/client.h, opts.measure_only): no server, no clock
 * controller. On the sim GPU (exact counters, measured at the hooks) it must report every kind's
 * power as the GPU drew it, the blocked power, the clock the GPU ran at, and change no clock;
 * options that need a server, an out-of-range chunk and the call on a server-driven client are
 * refused. The device-stream path runs on the fake drivers in tests/cli/client_gpu_check.sh. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/client.h"
#include "perseus/gpu.h"

#define REL_TOL 1e-9 /* the sim's counters are exact: only rounding separates the figures */

typedef struct truth {
    double time_s[4], energy_j[4]; /* per kind (chunk * 2 + instr) */
    double idle_s, idle_j;
} truth;

static const prs_gpu_work work[4] = {{0.010, 0.9}, {0.020, 0.8}, {0.006, 0.5}, {0.012, 0.3}};

/* One computation of kind k under the hooks; the truth read off the counters around it. */
static void computation(prs_client *c, prs_gpu *g, int k, int mb, truth *t)
{
    assert_int_equal(prs_client_begin(c, (prs_instr)(k % 2), mb, k / 2), 0);
    double t0 = prs_gpu_now_s(g), e0 = prs_gpu_read_energy_j(g);
    assert_int_equal(prs_gpu_sim_run(g, &work[k], NULL), 0);
    t->time_s[k] += prs_gpu_now_s(g) - t0;
    t->energy_j[k] += prs_gpu_read_energy_j(g) - e0;
    assert_int_equal(prs_client_end(c, (prs_instr)(k % 2), mb, k / 2), 0);
}

static void idle(prs_gpu *g, double s, truth *t)
{
    double t0 = prs_gpu_now_s(g), e0 = prs_gpu_read_energy_j(g);
    assert_int_equal(prs_gpu_sim_idle(g, s), 0);
    t->idle_s += prs_gpu_now_s(g) - t0;
    t->idle_j += prs_gpu_read_energy_j(g) - e0;
}

static void test_sim_exact(void **state)
{
    (void)state;
    prs_gpu *g;
    prs_error err;
    assert_int_equal(prs_gpu_open("sim:a100", &g, &err), 0);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1;
    o.gpu = g;
    o.warmup_iterations = 2;
    prs_client *c;
    assert_int_equal(prs_client_new(&o, &c, &err), 0);
    truth t = {0}, warm = {0};
    for (int it = 0; it < 10; it++) {
        truth *to = it < o.warmup_iterations ? &warm : &t;
        /* kinds in an order no schedule has: measure-only checks none */
        for (int mb = 0; mb < 3; mb++) {
            computation(c, g, (it + mb) % 4, mb, to);
            idle(g, 0.004 * (mb + 1), to);
            computation(c, g, (it + mb + 2) % 4, mb, to);
        }
        assert_int_equal(prs_client_iteration_end(c), 0);
    }
    prs_client_kind k[8], blocked;
    int n = -1, mhz = 0;
    assert_int_equal(prs_client_measured(c, k, 8, &n, &blocked), 0);
    assert_int_equal(n, 4);
    assert_int_equal(prs_gpu_sm_clock_now(g, &mhz), 0);
    for (int i = 0; i < 4; i++) {
        int kind = k[i].chunk * 2 + k[i].instr;
        assert_int_equal(kind, i); /* in (chunk, instr) order */
        assert_int_equal(k[i].windows, 12);
        assert_int_equal(k[i].clock_min_mhz, mhz);
        assert_int_equal(k[i].clock_max_mhz, mhz);
        assert_true(fabs(k[i].time_s / t.time_s[i] - 1) < REL_TOL);
        double p = t.energy_j[i] / t.time_s[i];
        assert_true(fabs(k[i].power_w / p - 1) < REL_TOL);
    }
    assert_int_equal(blocked.chunk, -1);
    assert_true(fabs(blocked.power_w / (t.idle_j / t.idle_s) - 1) < 1e-6);
    prs_client_stats st;
    prs_client_get_stats(c, &st);
    assert_int_equal(st.iterations, 10);
    assert_int_equal(st.posted, 8); /* past the warm-up */
    assert_string_equal(st.phase, "profiling");
    prs_client_free(c);
    int locked = -1;
    assert_int_equal(prs_gpu_sim_clock(g, &locked), 0);
    assert_int_equal(locked, 0);
    assert_int_equal(prs_gpu_sim_clock_changes(g), 0);
    prs_gpu_close(g);
}

static void test_refused(void **state)
{
    (void)state;
    prs_gpu *g;
    prs_error err;
    assert_int_equal(prs_gpu_open("sim:a100", &g, &err), 0);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.measure_only = 1;
    o.gpu = g;
    o.server_url = "http://127.0.0.1:1";
    prs_client *c = (prs_client *)&o;
    assert_int_equal(prs_client_new(&o, &c, &err), PRS_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err.msg, "measure_only runs without a server"));
    o.server_url = NULL;
    o.job_spec_json = "{}";
    assert_int_equal(prs_client_new(&o, &c, &err), PRS_EINVAL);
    o.job_spec_json = NULL;
    assert_int_equal(prs_client_new(&o, &c, &err), 0);
    assert_int_equal(prs_client_begin(c, PRS_FORWARD, 0, PRS_CLIENT_MAX_CHUNKS), PRS_EINVAL);
    assert_int_equal(prs_client_begin(c, PRS_FORWARD, 0, -1), PRS_EINVAL);
    int n = 0;
    assert_int_equal(prs_client_measured(c, NULL, 0, &n, NULL), 0);
    assert_int_equal(n, 0);
    prs_client_free(c);

    /* A server-driven client has nothing of the kind. */
    prs_client_opts_init(&o);
    o.gpu = g;
    o.server_url = "http://127.0.0.1:1";
    o.job_id = "j";
    o.token = "t";
    assert_int_equal(prs_client_new(&o, &c, &err), 0);
    assert_int_equal(prs_client_measured(c, NULL, 0, &n, NULL), PRS_EINVAL);
    prs_client_free(c);
    assert_int_equal(prs_client_abi_size(PRS_ABI_CLIENT_KIND), sizeof(prs_client_kind));
    prs_gpu_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_exact),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
