/* The clock tags of the device-stream path when the hooks or the clock controller misbehave
 * (src/client/devtime.c, resolve.c), on the fake libcuda and fake NVML with a private
 * perseus-gpud: one rank, profiling at one mid clock set straight into the client's schedule (no
 * server). Each window must carry the clock its computation ran at:
 *   - a window left open at the end of an iteration (a begin without its end, as a `with` block
 *     whose begin raised used to leave) still has its clock change followed: the windows after it
 *     are tagged with the mid clock, never f_max;
 *   - a clock change whose answer comes late (the private daemon stopped) does not hold the
 *     stream: the stream runs the whole iteration while the daemon is stopped, and the answer,
 *     when it comes, tags that iteration's computations with the mid clock; the iterations after
 *     it report windows, tagged with the mid clock;
 *   - computations run at the GPU's default clocks are tagged with no clock, never f_max. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "client_int.h"
#include "fake_cuda.h"
#include "fake_dir.h"
#include "stream_client.h"
#include "perseus/clock.h"
#include "perseus/client.h"
#include "perseus/gpu.h"
#include "wait.h"

#define ITERS 40
#define ITERS_MAX 1000 /* about 30 s on an idle machine */

static fakecu_api cu;
static const char *cu_path, *nvml_path;

/* Two forwards and two backwards on stream cs, each a tracked kernel planned at mhz: 0, or the
 * first hook's error (no assertion: the caller may have a daemon to wake up first). */
static int try_iteration(prs_client *c, CUstream cs, int mhz)
{
    int rc = 0;
    for (int k = 0; k < 4; k++) {
        prs_instr in = k < 2 ? PRS_FORWARD : PRS_BACKWARD;
        int b = prs_client_begin(c, in, k % 2, 0);
        cu.launch_work(cs, in == PRS_FORWARD ? 0.004 : 0.008, 0.7, mhz);
        int e = prs_client_end(c, in, k % 2, 0);
        rc = rc ? rc : b ? b : e;
    }
    cu.cuStreamSynchronize(cs); /* as a framework reading the loss */
    sleep_s(0.004);             /* the host's own work between iterations (not a synchronisation) */
    int it = prs_client_iteration_end(c);
    return rc ? rc : it;
}

static void run_iteration(prs_client *c, CUstream cs, int mhz)
{
    assert_int_equal(try_iteration(c, cs, mhz), 0);
}

/* Queued iterations with windows, and their windows tagged mhz and otherwise. */
static void count_tags(prs_client *c, int mhz, int *iters, int *at, int *other)
{
    *iters = *at = *other = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->q_len; i++) {
        const prs__client_iteration *q = &c->queue[(c->q_head + i) % c->opts.max_queue];
        *iters += q->n_windows > 0;
        for (int w = 0; w < q->n_windows; w++)
            *(q->windows[w].clock_mhz == mhz ? at : other) += 1;
    }
    pthread_mutex_unlock(&c->mu);
}

/* A client on a new stream of device 0 (stream_client.h); *mid: a mid clock. */
static prs_client *open_client(CUstream *cs, int *mid)
{
    prs_client *c = stream_client_open(&cu, cu_path, cs);
    int clocks[256], n = 0;
    assert_int_equal(prs_gpu_clocks(c->gpu, clocks, 256, &n), 0);
    *mid = clocks[n / 2];
    assert_true(*mid < c->f_max_mhz);
    return c;
}

/* One case: a client profiling at a mid clock, first(c, cs, mid) making its first iteration, then
 * iterations until ITERS / 2 of them have windows (an iteration's windows come once its round's
 * fit is usable, later on a busy machine), within ITERS_MAX iterations; every window must be
 * tagged with the mid clock. */
static void run_case(const char *name, void (*first)(prs_client *, CUstream, int))
{
    if (!cu_path || !nvml_path) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "tags"), 0);
    CUstream cs;
    int mid, iters, at, other;
    prs_client *c = open_client(&cs, &mid);
    stream_client_set_profiling(c, mid);
    first(c, cs, mid);
    int n = 1;
    for (iters = 0; iters < ITERS / 2 && n < ITERS_MAX; n++) {
        run_iteration(c, cs, mid);
        count_tags(c, mid, &iters, &at, &other);
    }
    count_tags(c, mid, &iters, &at, &other);
    print_message("%s: after %d iterations, %d with windows, %d windows at %d MHz, %d otherwise\n",
                  name, n, iters, at, mid, other);
    assert_true(iters >= ITERS / 2);
    assert_int_equal(other, 0);
    stream_client_close(&cu, c, cs);
    fake_dir_end(dir, 1);
}

/* A begin whose clock change is queued, then the iteration's end with its window open. */
static void leave_window_open(prs_client *c, CUstream cs, int mid)
{
    assert_int_equal(prs_client_begin(c, PRS_FORWARD, 0, 0), 0);
    assert_int_equal(prs_client_iteration_end(c), 0);
}

/* An iteration whose clock change is answered after on_clock's 0.5 s (the daemon stopped). */
static void answer_late(prs_client *c, CUstream cs, int mid)
{
    pid_t helper = (pid_t)prs_clockctl_pid(c->ctl);
    assert_true(helper > 0);
    kill(helper, SIGSTOP); /* no assertion until it runs again: a stopped daemon would outlive us */
    int rc = try_iteration(c, cs, mid);
    sleep_s(0.1); /* the daemon stays stopped a while longer (the situation under test) */
    kill(helper, SIGCONT);
    assert_int_equal(rc, 0);
}

/* One poll of the device-stream path: p is still the first pending iteration (no report before
 * its round's fit is usable, so p is not freed under the caller); 1 once it is resolved or
 * failed. */
static int poll_pending(prs_client *c, const prs__client_pend *p)
{
    prs__client_dev_poll(c, 0);
    assert_ptr_equal(c->dev->head, p);
    return p->resolved || p->failed;
}

/* Poll until the first pending iteration p is resolved or failed (at most 30 s). */
static void wait_resolved(prs_client *c, const prs__client_pend *p)
{
    PRS_WAIT_UNTIL(poll_pending(c, p), 30);
}

/* The daemon stopped before the iteration that changes the clock, the stream run to its end, the
 * daemon woken: the stream went through while the request was unanswered. The daemon applied the
 * change only when it ran again, after those computations: they ran at the previous clock, and
 * the answer (the mid clock, once it came) arrived after they began, so they get no clock (-1),
 * never the mid clock they did not run at. The next iteration's computations, which began after
 * the answer, get the mid clock. */
static void test_stream_not_held(void **state)
{
    if (!cu_path || !nvml_path) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "held"), 0);
    CUstream cs;
    int mid;
    prs_client *c = open_client(&cs, &mid);
    /* The answer comes when the daemon runs again, however long a loaded machine takes to get
     * it there: the iteration waits for it. */
    c->dev->answer_wait_s = 120;
    stream_client_set_profiling(c, mid);
    pid_t helper = (pid_t)prs_clockctl_pid(c->ctl);
    assert_true(helper > 0);
    kill(helper, SIGSTOP);
    int rc = try_iteration(c, cs, mid); /* ends with the stream synchronised */
    long request = prs_clockctl_last_request(c->ctl);
    int m = 0, due = request > 0 && prs_clockctl_answer(c->ctl, request, &m) == 0;
    kill(helper, SIGCONT);
    assert_int_equal(rc, 0);
    assert_true(due); /* the stream ran the iteration with the answer still due */
    prs__client_pend *p = c->dev->head;
    assert_non_null(p);
    wait_resolved(c, p);
    assert_true(p->resolved);
    assert_true(p->n_ops == 4);
    assert_true(prs_clockctl_answer(c->ctl, request, &m) == 1 && m == mid);
    for (int i = 0; i < p->n_ops; i++)
        assert_int_equal(p->op_clock[i], -1);
    /* answered: the iterations after it run at the mid clock and say so (their windows come
     * once the round's fit is usable) */
    int iters = 0, at = 0, other = 0;
    for (int n = 0; iters == 0 && n < ITERS_MAX; n++) {
        run_iteration(c, cs, mid);
        count_tags(c, mid, &iters, &at, &other);
    }
    assert_true(iters > 0 && at > 0);
    assert_int_equal(other, 0);
    stream_client_close(&cu, c, cs);
    fake_dir_end(dir, 1);
}

/* Profiling at the GPU's default clocks (a schedule's 0, as after a lock that did not take was
 * reset): a real GPU then boosts as it likes, and under its power limit runs well below f_max, so
 * the computations are tagged with no clock (-1: no profile row), never with f_max. */
static void test_default_clock_untagged(void **state)
{
    if (!cu_path || !nvml_path) {
        prs_skip_input("no fake libcuda or NVML ($PRS_FAKE_CUDA, $PRS_FAKE_NVML)");
        return;
    }
    char dir[256];
    assert_int_equal(fake_dir_begin(dir, sizeof dir, "default"), 0);
    CUstream cs;
    int mid;
    prs_client *c = open_client(&cs, &mid);
    stream_client_set_profiling(c, 0);
    run_iteration(c, cs, c->f_max_mhz);
    prs__client_pend *p = c->dev->head;
    assert_non_null(p);
    wait_resolved(c, p);
    assert_true(p->resolved && p->n_ops == 4);
    for (int i = 0; i < p->n_ops; i++)
        assert_int_equal(p->op_clock[i], -1);
    stream_client_close(&cu, c, cs);
    fake_dir_end(dir, 1);
}

static void test_window_left_open(void **state)
{
    run_case("window left open", leave_window_open);
}

static void test_late_answer(void **state)
{
    run_case("late answer", answer_late);
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
    unsetenv("PRS_FAKE_NVML_DENY");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_left_open),
        cmocka_unit_test(test_late_answer),
        cmocka_unit_test(test_stream_not_held),
        cmocka_unit_test(test_default_clock_untagged),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, NULL));
}
