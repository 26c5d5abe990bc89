/* Device selection (perseus/gpu.h, src/gpu/devsel.c): spec forms and their errors, LOCAL_RANK,
 * CUDA_VISIBLE_DEVICES resolved by our own reading and by the fake CUDA driver, MIG refused, and
 * 8 simulated ranks on one node, each a process that opens the default device, locks its own
 * clock and reads energy and power: the fake devices' per-process accounting shows that every
 * physical GPU was driven only by the rank that owns it.
 *
 * The fake CUDA driver reads CUDA_VISIBLE_DEVICES once per process (as the real one does), so
 * every case that goes through it runs in a child process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "skips.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_int.h"
#include "fake_dir.h"
#include "fake_gpu.h"
#include "gpu_int.h"
#include "perseus/client.h"
#include "perseus/gpu.h"

#define NDEV 8

/* The fake devices' accounting, reached through the fake NVML (it links the shared fake state). */
typedef struct fakes {
    void *lib;
    fakegpu_dev *(*open)(int);
    void (*uuid_str)(const fakegpu_dev *, char *, size_t);
    void (*locked)(fakegpu_dev *, unsigned *, unsigned *);
    int (*touchers)(fakegpu_dev *, fakegpu_toucher *, int);
} fakes;

static int sym(void *lib, void *fn, size_t size, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) return -1;
    memcpy(fn, &p, size);
    return 0;
}

/* Load the fakes, point the nvml backend at them, make a fresh device directory of n devices. */
static int fakes_begin(fakes *f, char *dir, size_t dn, const char *tag, int n)
{
    const char *nvml = getenv("PRS_FAKE_NVML");
    if (!nvml || !*nvml || !getenv("PRS_FAKE_CUDA")) return -1;
    memset(f, 0, sizeof *f);
    if (!(f->lib = dlopen(nvml, RTLD_NOW | RTLD_LOCAL))) return -1;
    if (sym(f->lib, &f->open, sizeof f->open, "fakegpu_open") ||
        sym(f->lib, &f->uuid_str, sizeof f->uuid_str, "fakegpu_uuid_str") ||
        sym(f->lib, &f->locked, sizeof f->locked, "fakegpu_locked") ||
        sym(f->lib, &f->touchers, sizeof f->touchers, "fakegpu_touchers"))
        return -1;
    char v[16];
    snprintf(v, sizeof v, "%d", n);
    setenv("PRS_FAKE_NVML_DEVICES", v, 1);
    setenv("PRS_NVML_LIBRARY", nvml, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("LOCAL_RANK");
    unsetenv("SLURM_LOCALID"); /* the tests may themselves run under a launcher */
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("PRS_FAKE_NVML_MIG");
    return fake_dir_begin(dir, dn, tag);
}

static void fakes_end(fakes *f, const char *dir, int n)
{
    fake_dir_end(dir, n);
    unsetenv("PRS_FAKE_NVML_DEVICES");
    unsetenv("PRS_NVML_LIBRARY");
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("LOCAL_RANK");
    unsetenv("PRS_FAKE_NVML_MIG");
    unsetenv("PRS_CUDA_LIBRARY");
    dlclose(f->lib);
}

static void uuid_of(fakes *f, int i, char *buf, size_t n)
{
    fakegpu_dev *d = f->open(i);
    assert_non_null(d);
    f->uuid_str(d, buf, n);
}

/* ---- pure parsing ---- */

static void expect_rank(const char *v, int rc, int index)
{
    prs_error e = {0};
    int got = -5;
    assert_int_equal(prs__gpu_parse_local_rank(v, &got, &e), rc);
    if (rc == 0) assert_int_equal(got, index);
    if (rc) assert_non_null(strstr(e.msg, "LOCAL_RANK"));
    if (rc && v) assert_non_null(strstr(e.msg, v));
}

static void test_local_rank(void **state)
{
    expect_rank(NULL, 0, 0);
    expect_rank("0", 0, 0);
    expect_rank("7", 0, 7);
    expect_rank("1023", 0, 1023);
    const char *bad[] = {"", "abc", "-1", "1024", "99999999999", "1x", " 1", "+2", "0x3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_rank(bad[i], PRS_EINVAL, 0);
}

/* The launchers' variables: LOCAL_RANK first, then SLURM_LOCALID, then
 * OMPI_COMM_WORLD_LOCAL_RANK; the first set decides, a bad value is named with its variable. */
static void test_local_rank_vars(void **state)
{
    unsetenv("LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int index = -1;
    char who[96];
    prs_error e;
    assert_int_equal(prs_gpu_local_rank(&index, who, sizeof who, &e), 0);
    assert_int_equal(index, 0);
    assert_non_null(strstr(who, "SLURM_LOCALID"));
    assert_non_null(strstr(who, "OMPI_COMM_WORLD_LOCAL_RANK"));
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
    assert_int_equal(prs_gpu_local_rank(&index, who, sizeof who, &e), 0);
    assert_int_equal(index, 5);
    assert_string_equal(who, "OMPI_COMM_WORLD_LOCAL_RANK=5");
    setenv("SLURM_LOCALID", "3", 1);
    assert_int_equal(prs_gpu_local_rank(&index, who, sizeof who, &e), 0);
    assert_int_equal(index, 3);
    assert_string_equal(who, "SLURM_LOCALID=3");
    setenv("LOCAL_RANK", "1", 1);
    assert_int_equal(prs_gpu_local_rank(&index, NULL, 0, &e), 0);
    assert_int_equal(index, 1);
    unsetenv("LOCAL_RANK");
    setenv("SLURM_LOCALID", "x", 1);
    assert_int_equal(prs_gpu_local_rank(&index, who, sizeof who, &e), PRS_EINVAL);
    assert_non_null(strstr(e.msg, "SLURM_LOCALID='x'"));
    char spec[PRS_GPU_SPEC_MAX];
    assert_int_equal(prs_gpu_rank_device(spec, sizeof spec, &e), PRS_EINVAL);
    assert_non_null(strstr(e.msg, "SLURM_LOCALID"));
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
}

static void test_pci_normalize(void **state)
{
    const char *good[][2] = {{"0000:1a:00.0", "00000000:1A:00.0"},
                             {"00000000:1A:00.0", "00000000:1A:00.0"},
                             {"0001:Af:1F.7", "00000001:AF:1F.7"},
                             {"0000ABCD:02:03.1", "0000ABCD:02:03.1"}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char out[32];
        prs_error e;
        assert_int_equal(prs__gpu_pci_normalize(good[i][0], out, sizeof out, &e), 0);
        assert_string_equal(out, good[i][1]);
    }
    const char *bad[] = {"",
                         "1a:00.0",
                         "000:1a:00.0",
                         "00000:1a:00.0",
                         "0000:1a:00",
                         "0000:1a:00.8",
                         "0000:1a:20.0",
                         "0000:1g:00.0",
                         "0000:1a:00.0x",
                         "0000:1:00.0",
                         "0000:1a:0.0",
                         "0000:1a:00:0.0",
                         "0000-1a-00.0",
                         "0000:1a:00.00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[32];
        prs_error e = {0};
        assert_int_equal(prs__gpu_pci_normalize(bad[i], out, sizeof out, &e), PRS_EINVAL);
        assert_non_null(strstr(e.msg, "DOMAIN:BUS:DEVICE.FUNCTION"));
        if (*bad[i]) assert_non_null(strstr(e.msg, bad[i]));
    }
}

static char table[NDEV][PRS__GPU_UUID_LEN];

static void fill_table(void)
{
    for (int i = 0; i < NDEV; i++)
        snprintf(table[i], sizeof table[i], "GPU-%d%d00aa00-1111-2222-3333-44445555666%d",
                 i == 5 ? 4 : i, i, i);
}

/* Resolve and expect uuid table[want] (want >= 0) or an error whose message has the texts. */
static void expect_cvd(const char *cvd, int index, int want, const char *t1, const char *t2)
{
    char out[PRS__GPU_UUID_LEN] = "";
    prs_error e = {0};
    int rc = prs__gpu_cvd_resolve(cvd, index, "LOCAL_RANK=9", table, NDEV, out, sizeof out, &e);
    if (want >= 0) {
        assert_int_equal(rc, 0);
        assert_string_equal(out, table[want]);
        return;
    }
    assert_int_equal(rc, PRS_EINVAL);
    if (t1 && !strstr(e.msg, t1)) fail_msg("'%s' not in: %s", t1, e.msg);
    if (t2 && !strstr(e.msg, t2)) fail_msg("'%s' not in: %s", t2, e.msg);
}

static void test_cvd_resolve(void **state)
{
    fill_table();
    expect_cvd(NULL, 2, 2, NULL, NULL);
    expect_cvd(NULL, 8, -1, "NVML lists 8 GPUs", "LOCAL_RANK=9");
    expect_cvd("3,1,7,0,2,6,4,5", 0, 3, NULL, NULL);
    expect_cvd("3,1,7,0,2,6,4,5", 2, 7, NULL, NULL);
    expect_cvd("3,1,7,0,2,6,4,5", 7, 5, NULL, NULL);
    expect_cvd("3,1,7", 3, -1, "makes only 3 GPUs visible", "'3,1,7'");
    /* Nothing visible. */
    expect_cvd("", 0, -1, "leaves no GPU visible", "no GPU");
    expect_cvd("-1", 0, -1, "leaves no GPU visible", "'-1'");
    expect_cvd("NoDevFiles", 0, -1, "leaves no GPU visible", "NoDevFiles");
    /* CUDA ignores everything from an invalid entry on. */
    expect_cvd("0,2,-1,1", 1, 2, NULL, NULL);
    expect_cvd("0,2,-1,1", 3, -1, "only 2 GPUs visible", "'-1'");
    expect_cvd("0,9", 1, -1, "'9'", "NVML lists 8 GPUs");
    expect_cvd("0,9", 0, 0, NULL, NULL);
    expect_cvd("0,0", 1, -1, "names GPU 0 again", NULL);
    expect_cvd("1,,2", 1, -1, "'' is empty", NULL);
    expect_cvd("0, 1", 1, -1, "' 1'", "neither a GPU index nor a GPU-UUID");
    /* UUIDs: whole, a unique prefix (any case), an ambiguous or unknown prefix. */
    expect_cvd(table[6], 0, 6, NULL, NULL);
    expect_cvd("GPU-33", 0, 3, NULL, NULL);
    expect_cvd("4,gpu-3300AA", 1, 3, NULL, NULL);
    expect_cvd("GPU-4", 0, -1, "start of 2 GPUs' UUIDs", "'GPU-4'");
    expect_cvd("GPU-99", 0, -1, "no GPU of this node", NULL);
    /* MIG: refused when the rank's list reaches it. */
    expect_cvd("MIG-0a1b2c3d-0000-1111-2222-333344445555", 0, -1, "MIG", "whole");
    expect_cvd("2,MIG-0a1b", 1, -1, "MIG", "'MIG-0a1b'");
    expect_cvd("2,MIG-0a1b", 0, 2, NULL, NULL);
}

static void expect_spec_error(const char *spec, const char *text)
{
    prs_gpu *g = (prs_gpu *)1;
    prs_error e = {0};
    assert_int_equal(prs_gpu_open(spec, &g, &e), PRS_EINVAL);
    assert_null(g);
    if (!strstr(e.msg, text)) fail_msg("spec '%s': '%s' not in: %s", spec, text, e.msg);
}

static void test_spec_errors(void **state)
{
    const char *forms[] = {"nvml:",         "nvml:x",     "nvml:-1", "nvml:1024", "nvml:uuid=",
                           "nvml:uuid=abc", "nvml:gpu-1", "nvml: 1", "nvml:pci"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        expect_spec_error(forms[i], "nvml:pci=DOMAIN:BUS:DEV.FN");
    expect_spec_error("nvmlx", "nvml:uuid=GPU-UUID");
    expect_spec_error("cuda:0", "sim:PRESET");
    expect_spec_error("nvml:pci=zz", "DOMAIN:BUS:DEVICE.FUNCTION");
    expect_spec_error("nvml:pci=0000:1a:00", "'0000:1a:00'");
    expect_spec_error("nvml:MIG-0a1b2c3d", "MIG");
    expect_spec_error("nvml:uuid=MIG-0a1b2c3d", "not to one instance");
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open_nvml_uuid("MIG-0a1b", NULL, &g, &e), PRS_EINVAL);
    assert_non_null(strstr(e.msg, "MIG"));
    /* The rank's device: a bad LOCAL_RANK is named before any library is touched. */
    setenv("LOCAL_RANK", "three", 1);
    expect_spec_error("nvml", "LOCAL_RANK='three'");
    char spec[PRS_GPU_SPEC_MAX];
    assert_int_equal(prs_gpu_rank_device(spec, sizeof spec, &e), PRS_EINVAL);
    unsetenv("LOCAL_RANK");
    assert_int_equal(prs_gpu_rank_device_at(-2, NULL, spec, sizeof spec, &e), PRS_EINVAL);
    assert_non_null(strstr(e.msg, "-2"));
    assert_int_equal(prs_gpu_rank_device_at(0, NULL, NULL, 0, &e), PRS_EINVAL);
}

/* ---- through the fake libraries ---- */

/* Lock a clock through g and return the fake device index whose locked clock changed to it. */
static int which_device(fakes *f, prs_gpu *g, int mhz)
{
    assert_int_equal(prs_gpu_set_clock(g, mhz), 0);
    int found = -1;
    for (int i = 0; i < NDEV; i++) {
        unsigned lo, hi;
        f->locked(f->open(i), &lo, &hi);
        if (hi == (unsigned)mhz) {
            assert_int_equal(found, -1);
            found = i;
        }
    }
    assert_int_equal(prs_gpu_reset_clock(g), 0);
    return found;
}

static int open_which(fakes *f, const char *spec)
{
    prs_gpu *g;
    prs_error e;
    if (prs_gpu_open(spec, &g, &e)) fail_msg("spec '%s': %s", spec, e.msg);
    int d = which_device(f, g, 1200);
    prs_gpu_close(g);
    return d;
}

static void test_spec_forms(void **state)
{
    fakes f;
    char dir[256];
    if (fakes_begin(&f, dir, sizeof dir, "devsel-spec", NDEV))
        prs_skip_input("no fake NVML/CUDA libraries (PRS_FAKE_NVML, PRS_FAKE_CUDA)");
    char u3[64], spec[96];
    uuid_of(&f, 3, u3, sizeof u3);
    assert_int_equal(open_which(&f, "nvml:3"), 3);
    snprintf(spec, sizeof spec, "nvml:uuid=%s", u3);
    assert_int_equal(open_which(&f, spec), 3);
    snprintf(spec, sizeof spec, "nvml:%s", u3);
    assert_int_equal(open_which(&f, spec), 3);
    assert_int_equal(open_which(&f, "nvml:pci=0000:13:00.0"), 3);
    assert_int_equal(open_which(&f, "nvml:pci=00000000:15:00.0"), 5);
    prs_gpu *g;
    prs_error e;
    assert_int_equal(prs_gpu_open("nvml:pci=0000:33:00.0", &g, &e), PRS_EGPU);
    assert_non_null(strstr(e.msg, "00000000:33:00.0"));
    assert_int_equal(prs_gpu_open("nvml:uuid=GPU-00000000-0000-0000-0000-000000000000", &g, &e),
                     PRS_EGPU);
    assert_non_null(strstr(e.msg, "Not Found"));
    assert_int_equal(prs_gpu_open("nvml:8", &g, &e), PRS_EGPU);
    /* GPUs in MIG mode are refused whichever way they are named. */
    setenv("PRS_FAKE_NVML_MIG", "3,5", 1);
    assert_int_equal(prs_gpu_open("nvml:3", &g, &e), PRS_EINVAL);
    assert_non_null(strstr(e.msg, "MIG"));
    assert_int_equal(prs_gpu_open("nvml:pci=0000:15:00.0", &g, &e), PRS_EINVAL);
    assert_non_null(strstr(e.msg, "00000000:15:00.0"));
    assert_int_equal(open_which(&f, "nvml:4"), 4);
    fakes_end(&f, dir, NDEV);
}

/* Run fn in a child process (a fresh fake CUDA driver); the child's exit status, 0: passed. */
static int in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(fn(arg));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

typedef struct rank_case {
    const char *local_rank, *cvd, *cuda_lib;
    const char *want;     /* expected spec, or NULL */
    const char *texts[2]; /* in the error message when want is NULL */
} rank_case;

static int rank_case_child(void *arg)
{
    const rank_case *c = arg;
    if (c->local_rank) setenv("LOCAL_RANK", c->local_rank, 1);
    if (c->cvd) setenv("CUDA_VISIBLE_DEVICES", c->cvd, 1);
    setenv("PRS_CUDA_LIBRARY", c->cuda_lib, 1);
    char spec[PRS_GPU_SPEC_MAX];
    prs_error e = {0};
    int rc = prs_gpu_rank_device(spec, sizeof spec, &e);
    if (c->want) {
        if (rc || strcmp(spec, c->want) != 0) {
            fprintf(stderr, "case %s/%s: got rc %d spec '%s' (%s), want %s\n", c->local_rank,
                    c->cvd, rc, spec, e.msg, c->want);
            return 1;
        }
        return 0;
    }
    for (int i = 0; i < 2; i++)
        if (c->texts[i] && !strstr(e.msg, c->texts[i])) {
            fprintf(stderr, "case %s/%s: '%s' not in '%s' (rc %d)\n", c->local_rank, c->cvd,
                    c->texts[i], e.msg, rc);
            return 2;
        }
    return rc < 0 ? 0 : 3;
}

/* The same cases through the fake CUDA driver and through our own reading of the variable. */
static void run_rank_cases(fakes *f, const char *cuda_lib, int via_cuda)
{
    char u[NDEV][64], want[NDEV][96], prefix[40], uuid_cvd[512] = "";
    for (int i = 0; i < NDEV; i++) {
        uuid_of(f, i, u[i], sizeof u[i]);
        snprintf(want[i], sizeof want[i], "nvml:uuid=%s", u[i]);
    }
    snprintf(prefix, sizeof prefix, "%.12s", u[6]);
    snprintf(uuid_cvd, sizeof uuid_cvd, "%s,%s,%s", u[5], prefix, u[1]);
    rank_case cases[] = {
        {NULL, NULL, cuda_lib, want[0], {0}},
        {"5", NULL, cuda_lib, want[5], {0}},
        {"2", "3,1,7,0,2,6,4,5", cuda_lib, want[7], {0}},
        {"1", uuid_cvd, cuda_lib, want[6], {0}},
        {"2", uuid_cvd, cuda_lib, want[1], {0}},
        {"1", "0,2,-1,1", cuda_lib, want[2], {0}},
        {"8", NULL, cuda_lib, NULL, {"LOCAL_RANK=8", "8 GPUs"}},
        {"3", "3,1,7", cuda_lib, NULL, {"LOCAL_RANK=3", "'3,1,7'"}},
        {"2", "0,2,-1,1", cuda_lib, NULL, {"LOCAL_RANK=2", "CUDA_VISIBLE_DEVICES"}},
        {"0", "", cuda_lib, NULL, {via_cuda ? "CUDA_ERROR_NO_DEVICE" : "no GPU", "''"}},
        {"0", "NoDevFiles", cuda_lib, NULL, {"NoDevFiles", NULL}},
        {"0", "MIG-0a1b2c3d-0000", cuda_lib, NULL, {"MIG", "whole physical GPU"}},
        {"x1", "0", cuda_lib, NULL, {"LOCAL_RANK='x1'", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (in_child(rank_case_child, &cases[i]))
            fail_msg("%s: case %zu failed", via_cuda ? "CUDA path" : "env path", i);
}

static void test_rank_device_cuda(void **state)
{
    fakes f;
    char dir[256];
    if (fakes_begin(&f, dir, sizeof dir, "devsel-cuda", NDEV))
        prs_skip_input("no fake NVML/CUDA libraries (PRS_FAKE_NVML, PRS_FAKE_CUDA)");
    /* The driver answers alone: no NVML needed. */
    setenv("PRS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    run_rank_cases(&f, getenv("PRS_FAKE_CUDA"), 1);
    fakes_end(&f, dir, NDEV);
}

static void test_rank_device_env(void **state)
{
    fakes f;
    char dir[256];
    if (fakes_begin(&f, dir, sizeof dir, "devsel-env", NDEV))
        prs_skip_input("no fake NVML/CUDA libraries (PRS_FAKE_NVML, PRS_FAKE_CUDA)");
    run_rank_cases(&f, "/nonexistent/libcuda.so.1", 0);
    /* Without either library: the NVML error. */
    setenv("PRS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("PRS_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    char spec[PRS_GPU_SPEC_MAX];
    prs_error e;
    assert_int_equal(prs_gpu_rank_device(spec, sizeof spec, &e), PRS_ENOLIB);
    assert_non_null(strstr(e.msg, "libnvidia-ml"));
    fakes_end(&f, dir, NDEV);
}

/* ---- 8 ranks on one node ---- */

static const int perm[NDEV] = {3, 1, 7, 0, 2, 6, 4, 5};

static int rank_mhz(int rank)
{
    return prs_gpu_clock_at(prs_gpu_preset_find("a100"), 2 + 3 * rank);
}

/* One rank: the default device, a distinct clock through a controller, energy and power; then
 * wait for the test's look at the devices, and release the clock. */
static int rank_main(int rank, const char *cvd, const char *cuda_lib, int ready_fd, int go_fd)
{
    char v[16];
    snprintf(v, sizeof v, "%d", rank);
    setenv("LOCAL_RANK", v, 1);
    setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
    setenv("PRS_CUDA_LIBRARY", cuda_lib, 1);
    prs_gpu *g;
    prs_clockctl *c;
    prs_error e;
    if (prs_gpu_open("nvml", &g, &e)) {
        fprintf(stderr, "rank %d: %s\n", rank, e.msg);
        return 10;
    }
    if (prs_clockctl_new(g, PRS_CLOCKCTL_INLINE, &c, &e)) return 11;
    if (prs_clockctl_set(c, rank_mhz(rank)) || prs_clockctl_sync(c, 5)) return 12;
    uint64_t mj = 0;
    unsigned mw = 0;
    if (prs_gpu_energy_mj(g, &mj) || prs_gpu_power_mw(g, &mw) || mw == 0) return 13;
    char b = 'r';
    int ok = write(ready_fd, &b, 1) == 1;
    close(ready_fd); /* the test sees EOF once every rank is ready or gone */
    if (!ok || read(go_fd, &b, 1) != 1) return 14;
    prs_clockctl_free(c);
    prs_gpu_close(g);
    return 0;
}

/* Each physical GPU perm[r] was locked at rank r's clock, and only rank r's process touched it:
 * one lock, one reset, energy and power read. */
static void check_owners(fakes *f, const pid_t *pids)
{
    for (int r = 0; r < NDEV; r++) {
        fakegpu_dev *d = f->open(perm[r]);
        fakegpu_toucher t[FAKEGPU_MAX_TOUCHERS];
        int n = f->touchers(d, t, FAKEGPU_MAX_TOUCHERS);
        if (n != 1 || t[0].pid != (long)pids[r])
            fail_msg("GPU %d: %d processes touched it (first pid %ld), want only rank %d (pid %ld)",
                     perm[r], n, n ? t[0].pid : 0L, r, (long)pids[r]);
        assert_int_equal(t[0].calls[FAKEGPU_LOCK], 1);
        assert_int_equal(t[0].calls[FAKEGPU_RESET], 1);
        assert_true(t[0].calls[FAKEGPU_ENERGY] >= 1);
        assert_true(t[0].calls[FAKEGPU_POWER] >= 1);
    }
}

/* Start the ranks; once all hold their clocks, check each GPU's clock; let them finish. */
static void run_ranks(fakes *f, const char *cvd, const char *cuda_lib)
{
    int ready[2], go[2];
    pid_t pids[NDEV];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    fflush(NULL);
    for (int r = 0; r < NDEV; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            close(ready[0]);
            close(go[1]);
            _exit(rank_main(r, cvd, cuda_lib, ready[1], go[0]));
        }
    }
    close(ready[1]);
    close(go[0]);
    char b[NDEV];
    ssize_t got = 0, k;
    while (got < NDEV && (k = read(ready[0], b, sizeof b)) > 0)
        got += k;
    for (int r = 0; got == NDEV && r < NDEV; r++) {
        unsigned lo, hi;
        f->locked(f->open(perm[r]), &lo, &hi);
        if (hi != (unsigned)rank_mhz(r))
            fail_msg("GPU %d locked at %u MHz, want rank %d's %d", perm[r], hi, r, rank_mhz(r));
    }
    memset(b, 'g', sizeof b);
    assert_int_equal(write(go[1], b, sizeof b), (ssize_t)sizeof b);
    close(go[1]);
    close(ready[0]);
    for (int r = 0; r < NDEV; r++) {
        int status = 0;
        assert_int_equal(waitpid(pids[r], &status, 0), pids[r]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("rank %d failed (status %d)", r, status);
    }
    assert_int_equal(got, NDEV);
    check_owners(f, pids);
}

/* CUDA_VISIBLE_DEVICES as indices, or as UUIDs: whole ones and 12-character prefixes. */
static void eight_ranks(int via_cuda, int uuid_form)
{
    fakes f;
    char dir[256];
    if (fakes_begin(&f, dir, sizeof dir, "devsel-ranks", NDEV))
        prs_skip_input("no fake NVML/CUDA libraries (PRS_FAKE_NVML, PRS_FAKE_CUDA)");
    char cvd[512] = "3,1,7,0,2,6,4,5";
    if (uuid_form) {
        size_t used = 0;
        for (int r = 0; r < NDEV; r++) {
            char u[64];
            uuid_of(&f, perm[r], u, sizeof u);
            used += (size_t)snprintf(cvd + used, sizeof cvd - used, "%s%.*s", r ? "," : "",
                                     r % 2 ? 12 : 64, u);
        }
    }
    run_ranks(&f, cvd, via_cuda ? getenv("PRS_FAKE_CUDA") : "/nonexistent/libcuda.so.1");
    fakes_end(&f, dir, NDEV);
}

static void test_eight_ranks_cuda(void **state)
{
    eight_ranks(1, 0);
}

static void test_eight_ranks_cuda_uuids(void **state)
{
    eight_ranks(1, 1);
}

static void test_eight_ranks_env(void **state)
{
    eight_ranks(0, 0);
}

static void test_eight_ranks_env_uuids(void **state)
{
    eight_ranks(0, 1);
}

/* ---- the client's default ---- */

typedef struct client_case {
    const char *cuda_lib, *want;
    const char *rank_var; /* the launcher's variable that carries the local rank */
} client_case;

/* A client with no gpu_spec (nothing is posted: the server is unreachable and never waited for)
 * opens the rank's GPU. */
static int client_child(void *arg)
{
    const client_case *cc = arg;
    unsetenv("LOCAL_RANK");
    setenv(cc->rank_var, "2", 1);
    setenv("CUDA_VISIBLE_DEVICES", "3,1,7,0,2,6,4,5", 1);
    setenv("PRS_CUDA_LIBRARY", cc->cuda_lib, 1);
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = "http://127.0.0.1:9";
    o.job_id = "devsel";
    o.token = "t";
    o.controller = PRS_CLOCKCTL_INLINE;
    o.flush_timeout_s = 0;
    prs_client *c;
    prs_error e;
    if (prs_client_new(&o, &c, &e)) {
        fprintf(stderr, "prs_client_new: %s\n", e.msg);
        return 1;
    }
    int ok = strcmp(c->gpu_spec, cc->want) == 0;
    if (!ok) fprintf(stderr, "client opened %s, want %s\n", c->gpu_spec, cc->want);
    prs_client_free(c);
    return ok ? 0 : 2;
}

static void test_client_default(void **state)
{
    fakes f;
    char dir[256];
    if (fakes_begin(&f, dir, sizeof dir, "devsel-client", NDEV))
        prs_skip_input("no fake NVML/CUDA libraries (PRS_FAKE_NVML, PRS_FAKE_CUDA)");
    char u[64], want[96];
    uuid_of(&f, 7, u, sizeof u);
    snprintf(want, sizeof want, "nvml:uuid=%s", u);
    /* torchrun's LOCAL_RANK, Slurm's SLURM_LOCALID, Open MPI's OMPI_COMM_WORLD_LOCAL_RANK */
    const char *vars[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        client_case via_cuda = {getenv("PRS_FAKE_CUDA"), want, vars[i]};
        client_case via_env = {"/nonexistent/libcuda.so.1", want, vars[i]};
        assert_int_equal(in_child(client_child, &via_cuda), 0);
        assert_int_equal(in_child(client_child, &via_env), 0);
    }
    fakes_end(&f, dir, NDEV);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_rank),       cmocka_unit_test(test_local_rank_vars),
        cmocka_unit_test(test_pci_normalize),    cmocka_unit_test(test_cvd_resolve),
        cmocka_unit_test(test_spec_errors),      cmocka_unit_test(test_spec_forms),
        cmocka_unit_test(test_rank_device_cuda), cmocka_unit_test(test_rank_device_env),
        cmocka_unit_test(test_eight_ranks_cuda), cmocka_unit_test(test_eight_ranks_cuda_uuids),
        cmocka_unit_test(test_eight_ranks_env),  cmocka_unit_test(test_eight_ranks_env_uuids),
        cmocka_unit_test(test_client_default),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
