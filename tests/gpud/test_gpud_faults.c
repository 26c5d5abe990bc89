/* perseus-gpud end to end, faults (the fixture of gpud_fixture.h: the real binary over the fake
 * NVML): a read-back that lags the lock, clock requests beside LISTs when energy reads are slow
 * and beside another GPU's clock change held in the driver; resets that fail (SM and memory
 * clocks: reported, remembered across restarts, tried again), a lease file that cannot be
 * written, GPUs without memory locks, a GPU in MIG mode beside a served one, the private mode;
 * prints the measured times to reset. test_gpud_e2e.c checks the protocol and how leases end. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpud_fixture.h"

/* A read-back right after the lock that still sees the old clock (the fake's first 2 reads
 * after a lock): the daemon reads again before it calls the lock ignored, and keeps it. */
static void test_lock_read_back_lags(void **state)
{
    NEED_DAEMON();
    char buf[512], req[64];
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon("PRS_FAKE_NVML_LOCK_LAG_READS=2");
    int fd = try_connect();
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK ");
    snprintf(req, sizeof req, "SET 6 %d", T.low);
    snprintf(req + 32, 32, "ACK 6 ok %d %d ", T.low, T.low);
    EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), req + 32);
    print_message("a read-back that lags: '%s'\n", buf);
    close(fd);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    close(fd);
}

/* The lease file's text into buf ("" when missing). */
static const char *lease_file(char *buf, size_t n)
{
    char path[400];
    snprintf(path, sizeof path, "%s/leases", T.state);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* LIST on a new connection: GPU gpu's LOCKED_MHZ and LEASE_PID; -2 (both) when not listed. */
static void list_gpu(int gpu, int *locked, long *pid)
{
    char buf[4200];
    int fd = try_connect(), i = -1;
    *locked = -2;
    *pid = -2;
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    for (cmd(fd, "LIST", buf, sizeof buf); strncmp(buf, "GPU ", 4) == 0;
         read_line(fd, buf, sizeof buf))
        if (sscanf(buf, "GPU %d %*s %*s %*s %d %*s %*s %ld", &i, locked, pid) == 3 && i == gpu)
            break;
    if (i != gpu) *locked = -2, *pid = -2;
    close(fd);
}

/* Restart the daemon with the environment assignment extra (NULL: none), after SIGTERM (its exit
 * status must be want) or SIGKILL (want < 0). */
static void restart(int want, const char *extra)
{
    if (want >= 0)
        assert_int_equal(stop_daemon(SIGTERM), want);
    else
        assert_int_equal(stop_daemon(SIGKILL), 128 + SIGKILL);
    T.daemon = start_daemon(extra);
}

/* A reset that fails: RELEASE says so, the GPU is kept in the lease file as nobody's, LIST shows
 * its locked clock as unknown (-1); a daemon killed and restarted while it still fails keeps it
 * there, one stopped says so in its exit status; once the GPU heals, the next LEASE resets it
 * first, and a restart resets it too. */
static void test_reset_fails(void **state)
{
    NEED_DAEMON();
    static char env[400];
    char fail[330], buf[512], text[512];
    snprintf(fail, sizeof fail, "%s/fail-reset", T.dir);
    snprintf(env, sizeof env, "PRS_FAKE_NVML_FAIL_RESET=%s", fail);
    restart(0, env);
    int fd = lease_and_set(0, T.low), locked;
    long pid;
    touch(fail);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset released, but GPU-");
    print_message("a failed reset: '%s'\n", buf);
    assert_non_null(strstr(buf, "NVML nvmlDeviceResetGpuLockedClocks"));
    assert_int_equal(gpu_clock(0), T.low);
    EXPECT_PREFIX(lease_file(text, sizeof text), "GPU-");
    assert_non_null(strstr(text, " 0 0 0\n"));
    list_gpu(0, &locked, &pid);
    assert_true(locked == -1 && pid == 0);
    restart(-1, env); /* start-up recovery fails too: still listed, still unknown */
    assert_non_null(strstr(lease_file(text, sizeof text), " 0 0 0\n"));
    list_gpu(0, &locked, &pid);
    assert_int_equal(locked, -1);
    restart(1, env); /* the reset at exit fails: exit status 1 */
    assert_non_null(strstr(lease_file(text, sizeof text), " 0 0 0\n"));
    unlink(fail); /* healed: the next LEASE resets it before lending it */
    close(fd);
    fd = try_connect();
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK GPU-");
    assert_int_equal(gpu_clock(0), 1410);
    list_gpu(0, &locked, &pid);
    assert_true(locked == 0 && pid > 0);
    close(fd);
    fd = lease_and_set(0, T.low); /* dirty again, then healed by a restart */
    touch(fail);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset ");
    close(fd);
    unlink(fail);
    restart(-1, NULL);
    assert_int_equal(gpu_clock(0), 1410);
    assert_string_equal(lease_file(text, sizeof text), "");
}

/* The state file of the fake NVML in the daemon: its memory lock (" mem=..."). */
static int daemon_mem_locked(const char *state_file)
{
    char text[256] = "";
    FILE *f = fopen(state_file, "r");
    if (f) {
        if (!fgets(text, sizeof text, f)) text[0] = '\0';
        fclose(f);
    }
    if (!strstr(text, " mem=")) fail_msg("no memory lock in the fake's state: '%s'", text);
    return strstr(text, " mem=default") == NULL;
}

/* A memory clock reset that fails is a failed reset; a GPU without memory locks is not. */
static void test_memory_reset(void **state)
{
    NEED_DAEMON();
    static char env[400];
    char fail[330], st[330], buf[512], text[512];
    snprintf(fail, sizeof fail, "%s/fail-mem", T.dir);
    snprintf(st, sizeof st, "%s/nvml-state", T.dir);
    snprintf(env, sizeof env, "PRS_FAKE_NVML_FAIL_MEM_RESET=%s", fail);
    setenv("PRS_FAKE_NVML_STATE", st, 1); /* the daemon's; this process changes no clock */
    restart(0, env);
    unsetenv("PRS_FAKE_NVML_STATE");
    int fd = lease_and_set(1, T.low);
    assert_true(daemon_mem_locked(st));
    touch(fail);
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset released, but GPU-");
    assert_non_null(strstr(buf, "nvmlDeviceResetMemoryLockedClocks"));
    assert_int_equal(gpu_clock(1), 1410); /* the SM clock was reset */
    assert_true(daemon_mem_locked(st));
    assert_non_null(strstr(lease_file(text, sizeof text), " 0 0 0\n"));
    close(fd);
    fd = lease_and_set(0, T.low); /* its lock at LEASE fails too: nothing of ours to undo */
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "OK");
    close(fd);
    fd = lease_and_set(1, T.low); /* GPU 1's memory lock is still ours, still not undone */
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "ERR reset ");
    close(fd);
    unlink(fail);
    restart(0, "PRS_FAKE_NVML_NO_MEM_LOCK=1"); /* the reset at exit heals it: status 0 */
    assert_false(daemon_mem_locked(st));
    assert_string_equal(lease_file(text, sizeof text), "");
    fd = lease_and_set(1, T.low); /* no memory locks at all: nothing failed */
    EXPECT_PREFIX(cmd(fd, "RELEASE", buf, sizeof buf), "OK");
    close(fd);
    restart(0, NULL);
}

/* A lease the daemon cannot record is not given (a crash would leave its clocks locked). */
static void test_lease_file_unwritable(void **state)
{
    NEED_DAEMON();
    char tmp[330], buf[512];
    snprintf(tmp, sizeof tmp, "%s/leases.tmp", T.state);
    assert_int_equal(mkdir(tmp, 0755), 0); /* the lease file's temporary cannot be opened */
    int fd = try_connect(), locked;
    long pid;
    EXPECT_PREFIX(cmd(fd, "HELLO 1", buf, sizeof buf), "OK ");
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "ERR io the lease of GPU-");
    print_message("a lease that cannot be recorded: '%s'\n", buf);
    EXPECT_PREFIX(cmd(fd, "CLOCKS", buf, sizeof buf), "ERR state no lease");
    list_gpu(0, &locked, &pid);
    assert_true(locked == 0 && pid == 0);
    assert_int_equal(rmdir(tmp), 0);
    EXPECT_PREFIX(cmd(fd, "LEASE 0", buf, sizeof buf), "OK GPU-");
    close(fd);
    assert_true(wait_clock(0, 1410, mono_s()) >= 0);
}

/* A GPU in MIG mode is not served; the others are. A lease of it a dead daemon left in the lease
 * file stays there until a daemon that serves it resets it. */
static void test_mig_gpu_skipped(void **state)
{
    NEED_DAEMON();
    char text[512];
    int fd0 = lease_and_set(0, T.low);
    restart(-1, "PRS_FAKE_NVML_MIG=0");
    close(fd0);
    assert_int_equal(gpu_clock(0), T.low);
    EXPECT_PREFIX(lease_file(text, sizeof text), "GPU-"); /* kept, though not served */
    int locked;
    long pid;
    list_gpu(0, &locked, &pid);
    assert_int_equal(locked, -2);
    list_gpu(1, &locked, &pid);
    assert_true(locked == 0 && pid == 0);
    int fd = lease_and_set(1, T.low);
    close(fd);
    assert_true(wait_clock(1, 1410, mono_s()) >= 0);
    EXPECT_PREFIX(lease_file(text, sizeof text), "GPU-"); /* GPU 0's, still */
    restart(0, NULL); /* serves GPU 0 again: resets it at start-up */
    assert_int_equal(gpu_clock(0), 1410);
    assert_string_equal(lease_file(text, sizeof text), "");
}

/* In a child: LIST for seconds, and at least 20 times; writes "lists distinct_energies worst_ms" to
 * fd, or "f why". */
static void child_lists(int fd, double seconds)
{
    char buf[4200], out[128] = "f no connection";
    unsigned long long last = 0;
    int c = try_connect(), lists = 0, distinct = 0;
    double worst = 0;
    if (c >= 0 && raw_cmd(c, "HELLO 1", buf, sizeof buf) == 0) {
        for (double end = mono_s() + seconds; mono_s() < end || lists < 20; lists++) {
            double t0 = mono_s();
            unsigned long long e = 0;
            if (raw_cmd(c, "LIST", buf, sizeof buf) ||
                sscanf(buf, "GPU 0 %*s %*s %*s %*s %llu", &e) != 1)
                break;
            while (strncmp(buf, "OK ", 3) != 0 && read_line(c, buf, sizeof buf) == 0)
                ;
            if (mono_s() - t0 > worst) worst = mono_s() - t0;
            distinct += e != last;
            last = e;
            nap_ms(20); /* a tool's polling interval */
        }
        snprintf(out, sizeof out, "%d %d %.3f", lists, distinct, 1e3 * worst);
    }
    if (write(fd, out, strlen(out)) < 0) _exit(1);
    _exit(0);
}

/* Energy reads that keep a CPU busy for 200 ms each (an H100's take 3 ms): a tool polling LIST
 * must not hold up a trainer's clock requests, since the daemon's reader thread takes the
 * readings (the poll loop used to read 2 reads per LIST), and LIST's energy still moves. A
 * request held up by a read lasts at least the read: the bound is half of it, far above what a
 * busy machine adds to a request that is not held up. */
static void test_energy_reader(void **state)
{
    NEED_DAEMON();
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon("PRS_FAKE_NVML_READ_MS=200");
    int fd = lease_and_set(0, T.low), p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_lists(p[1], 2.5);
    }
    close(p[1]);
    char buf[512], req[64];
    double worst = 0;
    int sets = 0;
    for (double end = mono_s() + 2.5; mono_s() < end || sets < 100; sets++) {
        snprintf(req, sizeof req, "SET %d %d", sets + 2, sets % 2 ? T.low : 1410);
        double t0 = mono_s();
        EXPECT_PREFIX(cmd(fd, req, buf, sizeof buf), "ACK ");
        if (mono_s() - t0 > worst) worst = mono_s() - t0;
        nap_ms(5); /* a trainer's pace */
    }
    char got[128] = "";
    ssize_t n = read(p[0], got, sizeof got - 1);
    got[n > 0 ? n : 0] = '\0';
    close(p[0]);
    waitpid(pid, NULL, 0);
    int lists = 0, distinct = 0;
    double list_ms = 0;
    if (sscanf(got, "%d %d %lf", &lists, &distinct, &list_ms) != 3) fail_msg("LIST child: %s", got);
    print_message("energy reads of 200 ms: %d SETs beside %d LISTs, slowest SET %.2f ms, slowest "
                  "LIST %.2f ms, %d different energy readings of GPU 0\n",
                  sets, lists, 1e3 * worst, list_ms, distinct);
    assert_true(lists >= 20 && sets >= 100);
    assert_true(worst < 0.100 && list_ms < 100); /* a read in the loop: 200 ms at least */
    assert_true(distinct >= 2);                  /* the reader refreshes every second */
    close(fd);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

/* Send a request without waiting for its answer. */
static void send_only(int fd, const char *req)
{
    char line[128];
    int len = snprintf(line, sizeof line, "%s\n", req);
    assert_int_equal(send(fd, line, (size_t)len, MSG_NOSIGNAL), len);
}

/* One GPU's clock change held in the driver (PRS_FAKE_NVML_SET_HOLD) holds up only its own
 * connection: another trainer's lease and SET on the other GPU are answered while it is held (a
 * daemon applying SETs in its loop answers nothing until the call returns), its own ACK comes
 * once the call returns, and a leaseholder that goes away while its SET is held has its GPU
 * reset after the call returns. */
static void test_set_not_serialised(void **state)
{
    NEED_DAEMON();
    static char env[400];
    char hold[320], buf[512], req[64], want[64];
    int clocks[8], n;
    assert_int_equal(prs_gpu_clocks(T.gpu[0], clocks, 8, &n), 0);
    snprintf(hold, sizeof hold, "%s/set-hold", T.dir);
    snprintf(env, sizeof env, "PRS_FAKE_NVML_SET_HOLD=%s", hold);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(env);
    int a = try_connect();
    assert_true(a >= 0);
    EXPECT_PREFIX(cmd(a, "HELLO 1", buf, sizeof buf), "OK perseus-gpud 1 ");
    EXPECT_PREFIX(cmd(a, "LEASE 0", buf, sizeof buf), "OK GPU-");
    touch(hold);
    snprintf(req, sizeof req, "SET 1 %d", T.low);
    send_only(a, req);
    send_only(a, "CLOCKS");          /* handled after the ACK: answers stay in order */
    int b = lease_and_set(1, T.low); /* fails after 5 s without an answer */
    EXPECT_PREFIX(cmd(b, "READ", buf, sizeof buf), "OK ");
    struct pollfd p = {a, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 0), 0); /* still held */
    unlink(hold);
    snprintf(want, sizeof want, "ACK 1 ok %d %d ", T.low, T.low);
    assert_int_equal(read_line(a, buf, sizeof buf), 0);
    EXPECT_PREFIX(buf, want);
    assert_int_equal(read_line(a, buf, sizeof buf), 0);
    EXPECT_PREFIX(buf, "OK ");
    assert_int_equal(gpu_clock(0), T.low);

    touch(hold);
    snprintf(req, sizeof req, "SET 2 %d", clocks[6]);
    send_only(a, req);
    close(a); /* gone while its SET is held */
    unlink(hold);
    assert_true(wait_clock(0, 1410, mono_s()) >= 0); /* reset, not left at clocks[6] */
    EXPECT_PREFIX(cmd(b, "READ", buf, sizeof buf), "OK ");
    close(b);
    assert_true(wait_clock(1, 1410, mono_s()) >= 0);
    assert_int_equal(stop_daemon(SIGTERM), 0);
    T.daemon = start_daemon(NULL);
}

/* Private mode: the daemon serves one end of a socketpair for GPU 1 with no config, outside our
 * session, and exits 0 after resetting when the other end closes. */
static void test_private_mode(void **state)
{
    NEED_DAEMON();
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        int fd = open(T.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        char fdarg[16];
        snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
        execl(T.bin, T.bin, "--private-fd", fdarg, "--gpu", "nvml:1", "--nvml-library", T.lib,
              (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    char buf[512], req[64], want[64];
    EXPECT_PREFIX(cmd(sv[0], "HELLO 1", buf, sizeof buf), "OK perseus-gpud 1 ");
    EXPECT_PREFIX(cmd(sv[0], "LEASE 0", buf, sizeof buf), "ERR nogpu");
    EXPECT_PREFIX(cmd(sv[0], "LEASE 1", buf, sizeof buf), "OK GPU-");
    snprintf(req, sizeof req, "SET 1 %d", T.low);
    snprintf(want, sizeof want, "ACK 1 ok %d %d ", T.low, T.low);
    EXPECT_PREFIX(cmd(sv[0], req, buf, sizeof buf), want);
    assert_int_equal(gpu_clock(1), T.low);
    assert_int_not_equal(getsid(pid), getsid(0)); /* its own session */
    double t0 = mono_s();
    close(sv[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(gpu_clock(1), 1410);
    print_message("private mode: reset and exit 0 in %.2f ms after the socket closed\n",
                  (mono_s() - t0) * 1e3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_read_back_lags), cmocka_unit_test(test_reset_fails),
        cmocka_unit_test(test_memory_reset),        cmocka_unit_test(test_lease_file_unwritable),
        cmocka_unit_test(test_mig_gpu_skipped),     cmocka_unit_test(test_private_mode),
        cmocka_unit_test(test_energy_reader),       cmocka_unit_test(test_set_not_serialised),
    };
    return prs_test_result(cmocka_run_group_tests(tests, setup, teardown));
}
