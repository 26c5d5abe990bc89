/* Fuzz target for perseus-gpud's protocol state machine (src/gpud/conn.c) over two sim GPUs.
 *
 * The input is split into the bytes of two connections (a 0xff byte switches between them, so
 * they compete for leases) and fed in chunks whose sizes come from the input too. Invariants:
 * replies are whole lines of printable ASCII; a connection that is closing or dropped holds no
 * lease; a GPU's holder is a live connection that points back at it; pending output stays within
 * the bound; and once both connections are freed, both GPUs are back at their default clock.
 * A broken invariant calls abort(). Hermetic: no sockets, no files, no NVML. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpud.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok) abort();
}

static gpud *daemon_once(void)
{
    static gpud *d;
    if (d) return d;
    gpud_log_setup(-1, GPUD_LOG_ERROR);
    d = calloc(1, sizeof *d);
    check(d != NULL);
    for (int i = 0; i < 2; i++) {
        prs_gpu *g;
        prs_error e;
        check(prs_gpu_open_sim(NULL, &g, &e) == 0);
        check(gpud_gpus_add(d, g, i, &e) == 0);
    }
    return d;
}

static void check_output(const gpud_conn *c)
{
    check(c->nout <= GPUD_OUT_MAX);
    if (c->dead) return;
    check(c->nout == 0 || c->out[c->nout - 1] == '\n');
    for (size_t i = 0; i < c->nout; i++)
        check(c->out[i] == '\n' || (c->out[i] >= 0x20 && c->out[i] < 0x7f));
}

static void check_leases(gpud *d, gpud_conn **conns)
{
    for (int k = 0; k < 2; k++) {
        gpud_conn *c = conns[k];
        if (c->closing || c->dead) check(c->lease == NULL);
        if (c->lease) check(c->lease->holder == c);
    }
    for (int i = 0; i < d->ngpus; i++) {
        gpud_conn *h = d->gpus[i].holder;
        check(h == NULL || h == conns[0] || h == conns[1]);
        if (h) check(h->lease == &d->gpus[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gpud *d = daemon_once();
    gpud_conn *conns[2] = {gpud_conn_new(-1, 100, 0, 0), gpud_conn_new(-1, 200, 1000, 1000)};
    check(conns[0] && conns[1]);
    d->private_mode = size > 0 && (data[0] & 1); /* uid 1000 may lease only in private mode */
    int who = 0;
    size_t i = 0;
    while (i < size) {
        size_t chunk = 1 + data[i] % 64, start = ++i;
        while (i < size && i - start < chunk && data[i] != 0xff)
            i++;
        gpud_conn *c = conns[who];
        gpud_conn_feed(d, c, (const char *)data + start, i - start);
        check_output(c);
        check_leases(d, conns);
        c->nout = 0; /* the peer read it */
        if (i < size && data[i] == 0xff) {
            who ^= 1;
            i++;
        }
    }
    for (int k = 0; k < 2; k++)
        gpud_conn_free(d, conns[k], "fuzz");
    for (int k = 0; k < d->ngpus; k++) {
        int f;
        check(d->gpus[k].holder == NULL);
        check(prs_gpu_sim_clock(d->gpus[k].g, &f) == 0 && f == 0);
        check(d->gpus[k].locked_mhz == 0);
    }
    return 0;
}
