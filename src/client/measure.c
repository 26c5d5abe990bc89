/* Measurement on the training thread when the backend's own counters are read at the hooks: the
 * sim backend (its time and energy advance exactly with the simulated work, so a read at a hook
 * is exact) and, as a fallback without a device stream, a driver whose work the caller's
 * device_sync waits for.
 *
 * Every computation is a window: begin syncs (when a device_sync is given), sets the clock
 * planned for this position of the iteration and reads the backend's time and energy; end syncs
 * and reads them again. A window is tagged with the clock in effect. The iteration runs from one
 * iteration_end to the next, so waits between computations (bubbles, communication) are in the
 * iteration but in no window; other work (prs_client_other_begin/end: the optimizer) is read
 * like a window and kept out of the blocked power; the rank's pace is the time from the
 * iteration's start to the end of its last computation (what it would take without waiting for
 * the other pipelines in the data-parallel all-reduce). With an exact counter (sim) the power
 * while blocked is measured as the energy outside the windows over the time outside them.
 *
 * Warm-up: the first warmup_iterations of the process are not reported; the server also drops
 * the first iterations of every profiling round (docs/api.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/clock.h"
#include "client_int.h"

static void device_sync(prs_client *c)
{
    if (c->opts.device_sync) c->opts.device_sync(c->opts.sync_user);
}

/* The controller counts a request that did not take (clock_failures in the stats). */
static void set_clock(prs_client *c, int mhz)
{
    if (!c->ctl) return; /* measure only */
    prs_clockctl_set(c->ctl, mhz);
    atomic_store_explicit(&c->clock_mhz, mhz, memory_order_relaxed);
}

/* The newest schedule, and the clock reset when the job ended. */
static void adopt(prs_client *c)
{
    prs__client_adopt_schedule(c);
    if (c->reset_clock) {
        c->reset_clock = 0;
        set_clock(c, 0);
    }
}

static void start_iteration(prs_client *c)
{
    adopt(c);
    c->iter_t0 = prs_gpu_now_s(c->gpu);
    c->iter_e0 = prs_gpu_read_energy_j(c->gpu);
    c->iter_started = 1;
}

static int grow_ops(prs_client *c)
{
    if (c->n_ops < c->cap_ops) return 0;
    int cap = c->cap_ops ? 2 * c->cap_ops : 64;
    prs__client_op *o = realloc(c->ops, sizeof *o * (size_t)cap);
    if (!o) return PRS_ENOMEM;
    c->ops = o;
    c->cap_ops = cap;
    return 0;
}

int prs_client_begin(prs_client *c, prs_instr instr, int microbatch, int chunk)
{
    if (!c) return PRS_EINVAL;
    if (c->opts.measure_only && (chunk < 0 || chunk >= PRS_CLIENT_MAX_CHUNKS)) return PRS_EINVAL;
    if (c->dev) return prs__client_dev_begin(c, instr, microbatch, chunk);
    if (c->in_window) return PRS_EINVAL;
    device_sync(c);
    if (!c->iter_started) start_iteration(c);
    if (grow_ops(c)) return PRS_ENOMEM;
    int global;
    int rc = prs__client_check_order(c, instr, microbatch, chunk, &global);
    int f = prs__client_planned_clock(c);
    if (f > 0 && f != prs_clockctl_requested(c->ctl)) set_clock(c, f);
    prs__client_op *o = &c->ops[c->n_ops];
    o->instr = instr;
    o->microbatch = microbatch;
    o->chunk = global;
    /* The clock known to be in effect; -1 while a change is not acknowledged yet (a window
     * never carries a clock that did not take). */
    o->clock_mhz = c->ctl ? prs_clockctl_confirmed(c->ctl) : prs__client_local_clock(c);
    if (o->clock_mhz == 0) o->clock_mhz = prs__client_default_clock(c);
    c->in_window = 1;
    o->t0 = prs_gpu_now_s(c->gpu);
    o->e0 = prs_gpu_read_energy_j(c->gpu);
    return rc;
}

int prs_client_end(prs_client *c, prs_instr instr, int microbatch, int chunk)
{
    if (!c) return PRS_EINVAL;
    if (c->dev) return prs__client_dev_end(c, instr, microbatch, chunk);
    if (!c->in_window || c->open_other) return PRS_EINVAL;
    prs__client_op *o = &c->ops[c->n_ops];
    device_sync(c);
    o->t1 = prs_gpu_now_s(c->gpu);
    o->e1 = prs_gpu_read_energy_j(c->gpu);
    c->in_window = 0;
    c->n_ops++;
    c->op++;
    return prs__client_check_end(c, instr, microbatch, chunk);
}

int prs_client_other_begin(prs_client *c)
{
    if (!c) return PRS_EINVAL;
    if (c->dev) return prs__client_dev_other_begin(c);
    if (c->in_window) return PRS_EINVAL;
    device_sync(c);
    if (!c->iter_started) start_iteration(c);
    c->in_window = 1;
    c->open_other = 1;
    c->other_t0 = prs_gpu_now_s(c->gpu);
    c->other_e0 = prs_gpu_read_energy_j(c->gpu);
    return 0;
}

int prs_client_other_end(prs_client *c)
{
    if (!c) return PRS_EINVAL;
    if (c->dev) return prs__client_dev_other_end(c);
    if (!c->in_window || !c->open_other) return PRS_EINVAL;
    device_sync(c);
    c->other_s += prs_gpu_now_s(c->gpu) - c->other_t0;
    c->other_j += prs_gpu_read_energy_j(c->gpu) - c->other_e0;
    c->in_window = 0;
    c->open_other = 0;
    return 0;
}

/* Windows of the iteration's computations (profiling only); NULL when none, when a window's
 * clock is not known to have been in effect, or out of memory. */
static prs__client_window *make_windows(const prs_client *c, int *n)
{
    *n = 0;
    if (c->n_ops <= 0) return NULL;
    for (int i = 0; i < c->n_ops; i++)
        if (c->ops[i].clock_mhz < 0) return NULL;
    prs__client_window *w = malloc(sizeof *w * (size_t)c->n_ops);
    if (!w) return NULL;
    for (int i = 0; i < c->n_ops; i++) {
        const prs__client_op *o = &c->ops[i];
        w[i] = (prs__client_window){o->instr,     o->microbatch, o->chunk,
                                    o->clock_mhz, o->t1 - o->t0, o->e1 - o->e0};
    }
    *n = c->n_ops;
    return w;
}

/* Power outside the windows, from an exact counter: (iteration energy - window energy) /
 * (iteration time - window time). 0 when not measurable. */
static double blocked_power(const prs_client *c, double time_s, double energy_j)
{
    if (!c->gpu_exact) return 0;
    double t = time_s - c->other_s, e = energy_j - c->other_j; /* other work is not blocking */
    if (c->opts.other_after_last && c->other_s == 0 && c->n_ops > 0) { /* the tail is other work */
        const prs__client_op *last = &c->ops[c->n_ops - 1];
        t -= c->iter_t0 + time_s - last->t1;
        e -= c->iter_e0 + energy_j - last->e1;
    }
    for (int i = 0; i < c->n_ops; i++) {
        t -= c->ops[i].t1 - c->ops[i].t0;
        e -= c->ops[i].e1 - c->ops[i].e0;
    }
    return t > 1e-6 * time_s && e > 0 ? e / t : 0;
}

static int iteration_end(prs_client *c)
{
    if (!c->iter_started) return 0;
    /* Wall-clock time between iteration ends: how fast the rank really runs (the server sizes
     * a plan switch's lead from it), whatever clock the GPU's times are on. */
    double wall = prs_mono_s(), wall_s = c->wall_end_s > 0 ? wall - c->wall_end_s : 0;
    c->wall_end_s = wall;
    if (c->dev) return prs__client_dev_iteration_end(c, wall_s);
    device_sync(c);
    double now = prs_gpu_now_s(c->gpu), energy = prs_gpu_read_energy_j(c->gpu);
    prs__client_iteration it;
    memset(&it, 0, sizeof it);
    it.iteration = c->iter_no;
    it.round = c->cur.round;
    it.plan_id = c->cur.plan_id;
    it.time_s = now - c->iter_t0;
    it.energy_j = energy - c->iter_e0;
    it.clock_mhz = c->n_ops && c->ops[0].clock_mhz > 0 ? c->ops[0].clock_mhz : c->f_max_mhz;
    it.pace_s = c->n_ops ? c->ops[c->n_ops - 1].t1 - c->iter_t0 : 0;
    it.wall_s = wall_s;
    it.blocking_power_w = blocked_power(c, it.time_s, it.energy_j);
    int report = prs__client_should_report(c, it.time_s, it.energy_j);
    if (report && prs__client_profiling(c) && !c->bad_order)
        it.windows = make_windows(c, &it.n_windows);
    prs__client_enqueue(c, &it, report);
    c->iter_no++;
    c->op = 0;
    c->n_ops = 0;
    c->in_window = 0;
    c->open_other = 0;
    c->other_s = c->other_j = 0;
    c->bad_order = 0;
    c->iter_t0 = now;
    c->iter_e0 = energy;
    adopt(c);
    return 0;
}

int prs_client_iteration_end(prs_client *c)
{
    if (!c) return PRS_EINVAL;
    int rc = iteration_end(c);
    /* After the iteration's own work, so the next one starts in order all the same. */
    return rc ? rc : prs__client_refused(c);
}
