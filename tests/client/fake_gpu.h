/* The device state shared by the test fakes of the NVIDIA libraries (fake_nvml.c: the management
 * library, fake_cuda.c: the driver API). Both link this one shared object, so in one process they
 * see the same devices; across processes they share them through files.
 *
 * One state per device, in a MAP_SHARED mapping: the file $PRS_FAKE_GPU_DIR/gpuN.state when that
 * variable is set (created and initialised once, by whichever process maps it first), otherwise
 * an anonymous mapping made once per process (inherited by children forked after it). A clock
 * controller in another process that locks the clock through the fake NVML therefore changes the
 * clock that the fake CUDA kernels of the training process run at, from that instant.
 *
 * What the state models, for the GPU model preset $PRS_FAKE_NVML_PRESET (default a100):
 *   - the SM clock in effect (locked clocks, or f_max; lower while a kernel runs and the power
 *     limiter of $PRS_FAKE_NVML_POWER_LIMIT_W, when set, holds it back: see fakegpu_power_limit_w),
 *     with a history of the changes and the instant (CLOCK_MONOTONIC) of each, so a kernel that
 *     runs across a change is timed piecewise: its remaining work continues at the new clock from
 *     the instant of the change;
 *   - the power drawn: P(f)·(1 + noise·z) while a kernel runs (times the kernel's power scale),
 *     the preset's blocking power ·(1 + noise·z) between kernels (a GPU waiting on a collective
 *     spins), with one z per kernel and per idle stretch (zero mean, unit variance, uniform),
 *     noise = $PRS_FAKE_NVML_NOISE (default 0). Until a kernel has run on the device the power
 *     is P(f) at the clock in effect, without noise (a busy GPU that nobody tells us about);
 *   - the energy counter: the exact integral of that power, as a reader sees it: refreshed only
 *     at the instants phase + k·R of CLOCK_MONOTONIC, R = $PRS_FAKE_NVML_REFRESH_MS (default 0:
 *     continuous), the phase in [0, R) different for each device. Power changes are entered at
 *     the device's model instants, which the kernel threads reach late when they are preempted:
 *     a thread that may still enter a change holds the device at the model instant it stands at
 *     (fakegpu_hold); a reading waits (FAKEGPU_READ_WAIT_S at most) until every hold reached the
 *     instant it began and answers with the model's state there, so a late thread makes a read
 *     slower, as a driver holding it up would, without changing the model's timeline or what the
 *     reading says (past the wait it integrates no further than the earliest hold).
 *     A change that lands before what a reader integrated anyway (no hold: a clock lock, a
 *     cross-device wait) is corrected backwards, except in a refresh's value a reader already
 *     got (as on a GPU, that value is final: the correction shows at the next refresh), and
 *     readings never decrease.
 * The preset, R, the noise and the noise seed ($PRS_FAKE_NVML_SEED, default 1) are read from the
 * environment of the process that creates a state; later processes use the stored values.
 * $PRS_FAKE_NVML_DEVICES (default 1, at most FAKEGPU_MAX_DEVICES) is the number of devices;
 * $PRS_FAKE_GPU_COUNT is an older name for it, read when the first is unset.
 *
 * Each device also counts, per process id, the calls made on it (fakegpu_touch), in a fixed table
 * of FAKEGPU_MAX_TOUCHERS processes under the device's lock, so a test can check from outside
 * which process locked, reset or read which GPU. */
#ifndef PRS_FAKE_GPU_H
#define PRS_FAKE_GPU_H

#include <stddef.h>

#include "perseus/gpumodel.h"

#define FAKEGPU_MAX_DEVICES 64
/* The longest a reading waits for late stream threads to reach its instant (seconds). */
#define FAKEGPU_READ_WAIT_S 0.25
#define FAKEGPU_API __attribute__((visibility("default")))

typedef struct fakegpu_dev fakegpu_dev; /* this process's view of one device */

/* CLOCK_MONOTONIC, seconds. */
FAKEGPU_API double fakegpu_now_s(void);
/* $PRS_FAKE_NVML_DEVICES (else $PRS_FAKE_GPU_COUNT), clamped to [1, FAKEGPU_MAX_DEVICES]. */
FAKEGPU_API int fakegpu_count(void);
/* The state of device index under the current $PRS_FAKE_GPU_DIR, mapped (and initialised if
 * new) on first use; later calls with the same directory return the same view, valid until the
 * process exits. NULL when index is out of range or the file cannot be mapped. Not for a child
 * forked from a multi-threaded process: take the views before forking. */
FAKEGPU_API fakegpu_dev *fakegpu_open(int index);

FAKEGPU_API int fakegpu_index(const fakegpu_dev *d);
FAKEGPU_API const prs_gpu_preset *fakegpu_preset(const fakegpu_dev *d);
/* The 16 bytes of the device's UUID, and its "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" form
 * (n >= 41). */
FAKEGPU_API void fakegpu_uuid(const fakegpu_dev *d, unsigned char out[16]);
FAKEGPU_API void fakegpu_uuid_str(const fakegpu_dev *d, char *buf, size_t n);

/* Lock the SM clock (min, max; max is the clock in effect), or reset it with (0, 0). Takes effect
 * now, including for kernels running on the device (they are woken to continue at the new
 * clock). */
FAKEGPU_API void fakegpu_set_locked(fakegpu_dev *d, unsigned min_mhz, unsigned max_mhz);
/* The locked clocks (0, 0 when default). */
FAKEGPU_API void fakegpu_locked(fakegpu_dev *d, unsigned *min_mhz, unsigned *max_mhz);
/* The SM clock in effect now. */
FAKEGPU_API int fakegpu_clock_mhz(fakegpu_dev *d);

/* The energy counter as a reader sees it now (joules; refresh-quantised, never decreasing). */
FAKEGPU_API double fakegpu_energy_j(fakegpu_dev *d);
/* The exact integral of the power drawn up to now, without refresh quantisation (joules). */
FAKEGPU_API double fakegpu_energy_exact_j(fakegpu_dev *d);
/* The power drawn now, noise included (watts). */
FAKEGPU_API double fakegpu_power_w(fakegpu_dev *d);
/* The power averaged over the window_s (rounded to whole refresh periods, at most 127 of
 * them) that ends at the latest refresh instant: what an H100's nvmlDeviceGetPowerUsage returns
 * (a 1 s average, refreshed with the energy counter). With a continuous counter, or before two
 * refreshes passed, the power now. */
FAKEGPU_API double fakegpu_power_avg_w(fakegpu_dev *d, double window_s);
/* The power limit enforced ($PRS_FAKE_NVML_POWER_LIMIT_W at creation; 0: none), over a window
 * as an H100 enforces its own (a matrix product drew 812 W, 16 % over the 700 W limit, for tens of
 * milliseconds between gaps and copies, 690 W when it ran alone for seconds): a limiter keeps A,
 * the power averaged exponentially with time constant FAKEGPU_LIMIT_TAU_S, and every
 * FAKEGPU_LIMIT_STEP_S lets a running kernel draw up to cap = L + FAKEGPU_LIMIT_GAIN * (L - A),
 * L the limit: the clock in effect is the highest of the grid, up to the locked clock or f_max,
 * at which the kernel's power fits the cap. Heavy work after a gap therefore runs at its clock
 * until the average nears the limit (about 1.4 time constants from idle), then the clock falls
 * until the average settles at the limit (with time constant FAKEGPU_LIMIT_TAU_S / (1 + gain));
 * work under the limit never meets it. The control instants are the first kernel's start plus
 * whole steps, and A starts there at the preset's blocking power (the power before the first
 * kernel is outside the limiter), so the clocks follow from the model instants of the kernels
 * alone, however late the threads that run them. */
FAKEGPU_API double fakegpu_power_limit_w(const fakegpu_dev *d);
#define FAKEGPU_LIMIT_TAU_S 0.25  /* the limiter's averaging time constant (s) */
#define FAKEGPU_LIMIT_STEP_S 0.01 /* its control period (s) */
#define FAKEGPU_LIMIT_GAIN 4.0    /* cap = L + gain * (L - average) */
/* The clock changes remembered (at most cap, the latest; oldest first): instants in t, clocks in
 * mhz. Returns how many were copied. For tests. */
FAKEGPU_API int fakegpu_clock_changes(fakegpu_dev *d, double *t, int *mhz, int cap);
/* The counter's refresh instants, phase + k * period of CLOCK_MONOTONIC (period 0: continuous). */
FAKEGPU_API void fakegpu_refresh(const fakegpu_dev *d, double *period_s, double *phase_s);

/* ---- who touched the device ---- */

#define FAKEGPU_MAX_TOUCHERS 16

typedef enum fakegpu_call {
    FAKEGPU_LOCK = 0, /* the SM clock locked */
    FAKEGPU_RESET,    /* the locked clocks reset */
    FAKEGPU_ENERGY,   /* the energy counter read */
    FAKEGPU_POWER,    /* the power read */
    FAKEGPU_NCALLS
} fakegpu_call;

typedef struct fakegpu_toucher {
    long pid;
    long calls[FAKEGPU_NCALLS]; /* indexed by fakegpu_call */
} fakegpu_toucher;

/* Count one call of the calling process on d. Processes past the table's FAKEGPU_MAX_TOUCHERS
 * are counted together under pid -1 in the last entry. No allocation. */
FAKEGPU_API void fakegpu_touch(fakegpu_dev *d, fakegpu_call call);
/* Copy up to cap entries of d's table to out (in first-touch order); returns how many there are.
 */
FAKEGPU_API int fakegpu_touchers(fakegpu_dev *d, fakegpu_toucher *out, int cap);

/* Run one kernel of work w on the device, starting at model instant t_start (<= now), drawing
 * power_scale times the model's busy power (1: the model's). Blocks the calling thread until the
 * kernel's model end, which follows the clock in effect while it runs, and returns that instant.
 * *at_planned_s (may be NULL) gets the part of its duration run at planned_mhz (0 when
 * planned_mhz <= 0). */
FAKEGPU_API double fakegpu_run_kernel(fakegpu_dev *d, double t_start, const prs_gpu_work *w,
                                      double power_scale, int planned_mhz, double *at_planned_s);
/* fakegpu_run_kernel for the holder of hold slot (t_start not before its hold): the hold follows
 * the kernel to its model end, where it stays when the call returns. */
FAKEGPU_API double fakegpu_run_kernel_held(fakegpu_dev *d, int slot, double t_start,
                                           const prs_gpu_work *w, double power_scale,
                                           int planned_mhz, double *at_planned_s);

/* ---- holds: what a late thread has still to enter ---- */

/* A holder (a stream) promises to enter no power change on d before model instant t: readers
 * integrate the power no further than the earliest live hold, so a change a preempted thread
 * enters late at its model instant never rewrites what a reader got. slot < 0 takes a free slot.
 * Returns the slot, -1 when every slot is taken (then nothing is held). */
FAKEGPU_API int fakegpu_hold(fakegpu_dev *d, int slot, double t);
/* fakegpu_hold at the instant now, read under the device's lock (no reader integrated past it);
 * *slot as above, updated. Returns that instant. */
FAKEGPU_API double fakegpu_hold_now(fakegpu_dev *d, int *slot);
/* The holder has nothing left to enter: the slot is free again. */
FAKEGPU_API void fakegpu_unhold(fakegpu_dev *d, int slot);

#endif
