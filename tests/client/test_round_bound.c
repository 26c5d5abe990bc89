/* A profiling round with short computations against a slow energy counter ends within its time
 * bound (src/client/resolve.c): on the fake libcuda and NVML with a private perseus-gpud, the
 * counter refreshing every 100 ms, one rank profiling at a mid clock (set straight into the
 * client's schedule, no server) runs 5 ms forwards drawing half the power of its 10 ms backwards.
 * The attribution's per-kind criterion (1 % standard error) is far off in that time, so the round
 * used to report nothing (its iterations waited for the fit, then were dropped when the FIFO
 * filled). With the round's bound shortened to 2 s of training, the rank reports iterations with
 * windows within 12 s of training, each carrying the fit's largest relative standard error and
 * the criterion, so the server can ask for more iterations at that clock and say why.
 *
 * test_poor_fit_restarts: a round's fit that the round bound has passed and that is still
 * rejected (here: 400 rows given to it that make the idle power -80 W, as rows spoiled by a
 * starved host did beside a CPU-bound test) starts again from the iterations after it, and the
 * round reports; it reported nothing, ever, before. test_poor_fit_within_noise: the fit
 * replaced, at every iteration, by rows that make the idle power -5 W, within three of its
 * standard errors: not spoiled, so such a fit used to hold the round for good; it starts again
 * once it stayed poor for another bound's length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "client_int.h"
#include "fake_cuda.h"
#include "fake_dir.h"
#include "stream_client.h"
#include "perseus/client.h"
#include "perseus/gpu.h"

#define BOUND_S 2.0
#define TRAIN_S 12.0 /* device time of training the test runs at most */

static fakecu_api cu;
static const char *cu_path, *nvml_path;

/* Two forwards (about 5 ms at the mid clock, half the power) and two backwards (about 10 ms).
 */
static void run_iteration(prs_client *c, CUstream cs, int mhz)
{
    for (int k = 0; k < 4; k++) {
        prs_instr in = k < 2 ? PRS_FORWARD : PRS_BACKWARD;
        assert_int_equal(prs_client_begin(c, in, k % 2, 0), 0);
        assert_int_equal(cu.launch_work_power(cs, in == PRS_FORWARD ? 0.0036 : 0.0072, 0.7, mhz,
                                              in == PRS_FORWARD ? 0.5 : 1.0),
                         CUDA_SUCCESS);
        assert_int_equal(prs_client_end(c, in, k % 2, 0), 0);
    }
    cu.cuStreamSynchronize(cs); /* as a framework reading the loss */
    assert_int_equal(prs_client_iteration_end(c), 0);
}

/* Queued reports with windows; the first one's fit figures. */
static int reports(prs_client *c, double *rel_se, double *criterion)
{
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->q_len; i++) {
        const prs__client_iteration *q = &c->queue[(c->q_head + i) % c->opts.max_queue];
        if (q->n_windows == 0) continue;
        if (n++ == 0) *rel_se = q->fit_rel_se, *criterion = q->fit_criterion;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* Replace the round-1 fit's rows by rows of a forward of 100 W and a negative idle power, from
 * second 1 of the host clock (before any real row): SPOILED, 400 rows of -80 W; NOISY, 2,000 rows
 * of -5 W with 4 J of noise each (of either sign in turn), which leaves the idle power within three
 * standard errors of zero. */
enum { SPOILED = 1, NOISY = 2 };
static void poison_fit(prs_client *c, int how)
{
    pthread_mutex_lock(&c->mu);
    prs__client_round_fit *f = NULL;
    for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++)
        if (c->dev->fits[i].fit && c->dev->fits[i].round == 1) f = &c->dev->fits[i];
    assert_non_null(f);
    prs__client_attrib *a;
    assert_int_equal(prs__client_attrib_new(f->n_kinds + 2, NULL, &a), 0);
    double t = 1.0, e = 0, idle_w = how == SPOILED ? -80 : -5;
    assert_int_equal(prs__client_attrib_energy(a, t, t, e), 0);
    for (int k = 0; k < (how == SPOILED ? 400 : 2000); k++, t += 0.1) {
        if (how == NOISY) e += (k / 2) % 2 ? -4 : 4; /* the idle power stays -5 W */
        if (k % 2 == 0) {                            /* forward throughout: 10 J */
            assert_int_equal(prs__client_attrib_busy(a, 0, t, t + 0.1), 0);
            e += 10.0;
        } else { /* forward for half, idle for half */
            assert_int_equal(prs__client_attrib_busy(a, 0, t, t + 0.05), 0);
            assert_int_equal(prs__client_attrib_known(a, t + 0.1), 0);
            e += 5.0 + 0.05 * idle_w;
        }
        assert_int_equal(prs__client_attrib_energy(a, t + 0.1, t + 0.1, e), 0);
    }
    prs__client_attrib_free(f->fit);
    f->fit = a;
    pthread_mutex_unlock(&c->mu);
}

/* The round-1 fit's restarts (-1: no fit). */
static int restarts(prs_client *c)
{
    int n = -1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < PRS__CLIENT_MAX_FITS; i++)
        if (c->dev->fits[i].fit && c->dev->fits[i].round == 1) n = c->dev->fits[i].restarts;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* One rank profiling at a mid clock with the round's bound at BOUND_S until a report with
 * windows is queued or TRAIN_S of training passed; poison: poison_fit after the first iteration
 * that made the fit. Checks the report and returns the fit's restarts. */
static int run_round(int poison)
{
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "bound"), 0);
    CUstream cs;
    prs_client *c = stream_client_open(&cu, cu_path, &cs);
    int clocks[256], n = 0;
    assert_int_equal(prs_gpu_clocks(c->gpu, clocks, 256, &n), 0);
    int mid = clocks[n / 2];
    c->dev->round_bound_s = BOUND_S;
    stream_client_set_profiling(c, mid);
    double rel_se = 0, criterion = 0, t0 = -1, trained_s = 0;
    int iters = 0, got = 0, poisoned = !poison;
    while (!got && trained_s < TRAIN_S) {
        run_iteration(c, cs, mid);
        iters++;
        int r = restarts(c); /* NOISY: poisoned again each iteration until it restarts */
        if (r >= 0 && (poison == NOISY ? r == 0 : !poisoned)) {
            poison_fit(c, poison);
            poisoned = 1;
        }
        pthread_mutex_lock(&c->mu);
        double now = c->dev->chain_end; /* the last resolved iteration's end, host clock */
        pthread_mutex_unlock(&c->mu);
        if (t0 < 0 && now > 0) t0 = now;
        if (t0 >= 0) trained_s = now - t0;
        got = reports(c, &rel_se, &criterion);
    }
    int r = restarts(c);
    print_message("after %d iterations (%.1f s of training): %d reports with windows, the first's "
                  "fit %.3g %% relative standard error (criterion %.3g %%), %d restarts\n",
                  iters, trained_s, got, 100 * rel_se, 100 * criterion, r);
    assert_true(got > 0);
    assert_true(rel_se > 0 && isfinite(rel_se));
    assert_true(criterion > 0 && criterion < 0.1);
    stream_client_close(&cu, c, cs);
    fake_dir_end(dir, 1);
    return r;
}

static void test_round_bound(void **state)
{
    if (!cu_path || !nvml_path) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    run_round(0);
}

static void test_poor_fit_restarts(void **state)
{
    if (!cu_path || !nvml_path) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    assert_true(run_round(SPOILED) >= 1);
}

static void test_poor_fit_within_noise(void **state)
{
    if (!cu_path || !nvml_path) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    assert_true(run_round(NOISY) >= 1);
}

static int setup(void **state)
{
    cu_path = getenv("PRS_FAKE_CUDA");
    nvml_path = getenv("PRS_FAKE_NVML");
    if (!cu_path || !*cu_path || !nvml_path || !*nvml_path || fakecu_load(&cu, cu_path)) {
        cu_path = NULL;
        return 0;
    }
    setenv("PRS_NVML_LIBRARY", nvml_path, 1);
    setenv("PRS_CUDA_LIBRARY", cu_path, 1);
    setenv("PRS_FAKE_GPU_COUNT", "1", 1);
    setenv("PRS_FAKE_NVML_REFRESH_MS", "100", 1);
    unsetenv("PRS_FAKE_NVML_DENY");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_bound),
                                       cmocka_unit_test(test_poor_fit_restarts),
                                       cmocka_unit_test(test_poor_fit_within_noise)};
    return prs_test_result(cmocka_run_group_tests(tests, setup, NULL));
}
