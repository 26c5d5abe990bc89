/* perseus-gpud: one SET applied to a GPU and its ACK line (docs/gpud.md, 'Protocol'). It touches
 * nothing but the handle it is given, so the poll loop runs it for a test or a private daemon and
 * a GPU's setter thread (setter.c) runs it on a handle of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpud.h"

/* A read-back right after a lock may still see the old clock (a real GPU applies the lock a
 * little later): before calling a lock ignored and resetting it, read again, this many times,
 * this far apart (at most 5 ms in all, and only when the first read-back disagrees). */
#define READBACK_RETRIES 5
#define READBACK_WAIT_NS 1000000L

const char *gpud_printable(const char *s, char *out, size_t n)
{
    size_t o = 0;
    for (; *s && o + 1 < n; s++)
        out[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    out[o] = '\0';
    return out;
}

/* NVML's return code from a backend message ending "(N)"; -1 when there is none. */
static int nvml_rc_of(const char *msg)
{
    const char *open = strrchr(msg, '(');
    if (!open) return -1;
    char *end;
    long v = strtol(open + 1, &end, 10);
    return end != open + 1 && *end == ')' && v >= 0 && v < 100000 ? (int)v : -1;
}

/* The SM clock after a lock at mhz, read again while it still reads above the lock; 0 when the
 * GPU cannot say (then act is "-"). */
static int read_back(prs_gpu *g, int mhz, char *act, size_t n)
{
    int actual = 0;
    int have = prs_gpu_sm_clock_now(g, &actual) == 0;
    for (int i = 0; have && mhz && actual > mhz && i < READBACK_RETRIES; i++) {
        struct timespec wait = {0, READBACK_WAIT_NS};
        nanosleep(&wait, NULL);
        have = prs_gpu_sm_clock_now(g, &actual) == 0;
    }
    snprintf(act, n, "-");
    if (have) snprintf(act, n, "%d", actual);
    return have ? actual : 0;
}

void gpud_apply_clock(const gpud_apply_req *r, gpud_apply *a)
{
    unsigned long long seq = (unsigned long long)r->seq;
    int mhz = r->mhz, rc = mhz ? prs_gpu_set_clock(r->g, mhz) : prs_gpu_reset_clock(r->g);
    long long apply_ns = (long long)(prs_mono_ns() - r->recv_ns);
    char msg[300], act[24];
    a->locked_mhz = r->locked_mhz;
    if (rc) {
        gpud_printable(prs_gpu_errmsg(r->g), msg, sizeof msg);
        gpud_log(GPUD_LOG_WARN, "msg=set_refused gpu=%s mhz=%d", r->uuid, mhz);
        snprintf(a->line, sizeof a->line, "ACK %llu refused %d - %lld %d %s", seq, r->locked_mhz,
                 apply_ns, nvml_rc_of(msg), msg[0] ? msg : "failed");
        return;
    }
    a->locked_mhz = mhz;
    int actual = read_back(r->g, mhz, act, sizeof act);
    if (mhz && actual > mhz) {
        gpud_log(GPUD_LOG_WARN, "msg=lock_ignored gpu=%s mhz=%d actual=%d action=reset", r->uuid,
                 mhz, actual);
        int reset = prs_gpu_reset_clock(r->g) == 0; /* the memory lock stays for the lease */
        a->locked_mhz = reset ? 0 : -1;
        snprintf(
            a->line, sizeof a->line,
            "ACK %llu mismatch %d %s %lld 0 the GPU reported success but runs at %d MHz, above "
            "the lock at %d MHz; %s",
            seq, a->locked_mhz, act, apply_ns, actual, mhz,
            reset ? "clocks reset" : "the reset that followed failed too");
        return;
    }
    snprintf(a->line, sizeof a->line, "ACK %llu ok %d %s %lld", seq, mhz, act, apply_ns);
}
