/* Energy measurement without a job (docs/monitor.md): the time and energy of any piece of code,
 * per GPU, between two calls.
 *
 *   const char *gpus[] = {"nvml:0", "nvml:1"};
 *   prs_monitor *m; prs_error err;
 *   prs_monitor_open(gpus, 2, &m, &err);
 *   prs_monitor_begin_window(m, "step", &err);
 *   ... run anything ...
 *   prs_monitor_reading r[2];
 *   prs_monitor_end_window(m, "step", r, 2, &err);   // r[i]: GPU i's time and energy
 *   prs_monitor_close(m);
 *
 * Windows have names; any number may be open at once (up to PRS_MONITOR_MAX_WINDOWS), nested or
 * overlapping, each ended by its name from any thread.
 *
 * How (docs/monitor.md): one thread per GPU reads the GPU's cumulative energy counter every few
 * milliseconds and keeps the instants where its value changed (the client's sampler); a counter
 * refreshed only every 10-100 ms, as on current GPUs, has its refresh instants fitted, so each
 * value has an exact time. A window's edge falls inside one counter interval, whose energy is
 * known exactly; it is split at the edge in proportion to the power of the intervals on either
 * side (power is assumed steady on each side of the edge, so a workload that starts at
 * begin_window is measured right). That is why end_window waits for the counter to move twice
 * past the window's end: up to two refresh periods (about 0.2 s on a 100 ms counter), at most
 * PRS_MONITOR_MAX_WAIT_S. GPUs whose energy counter cannot be read (before Volta) are measured
 * from power readings every 0.1 s instead.
 *
 * A reading is flagged an estimate when the counter did not complete one refresh interval inside
 * the window (a window shorter than the counter's refresh period, whose energy is then the edge
 * intervals' split alone) or when the counter did not move past the window's end in time.
 *
 * The sim backend's energy counter advances only when told to (perseus/gpu.h): a monitor keeps a
 * simulated GPU idle in wall time, so it draws the preset's blocking power, and its counter is
 * continuous. */
#ifndef PERSEUS_MONITOR_H
#define PERSEUS_MONITOR_H

#include "perseus/export.h"

#include "perseus/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PRS_MONITOR_MAX_GPUS 64
#define PRS_MONITOR_MAX_WINDOWS 4096 /* open at once */
#define PRS_MONITOR_MAX_NAME 255     /* bytes of a window's name */
#define PRS_MONITOR_MAX_WAIT_S 2.0   /* end_window waits at most this for the counter */
#define PRS_MONITOR_OPEN_WAIT_S 2.0  /* open waits at most this for each counter to move twice */

typedef struct prs_monitor prs_monitor;

/* One GPU's figures over one window: a value type. */
typedef struct prs_monitor_reading {
    double time_s;   /* the window's duration, CLOCK_MONOTONIC seconds */
    double energy_j; /* energy the GPU used over it */
    int estimate;    /* 1: an estimate, not a measurement (see above) */
} prs_monitor_reading;

/* Start measuring the n GPUs named by specs (prs_gpu_open's: "nvml:0", "nvml:uuid=GPU-...",
 * "sim:a100", ...; 1 <= n <= PRS_MONITOR_MAX_GPUS). Opens a handle of its own on each, starts a
 * reading thread per GPU and waits (at most PRS_MONITOR_OPEN_WAIT_S) until each counter has moved
 * twice, so the first window has a baseline. On failure *out is NULL and err names the GPU. Free
 * with prs_monitor_close. */
PRS_API int prs_monitor_open(const char *const *specs, int n, prs_monitor **out, prs_error *err);
/* Stop the threads and free everything; open windows are dropped. NULL is a no-op. */
PRS_API void prs_monitor_close(prs_monitor *m);

/* Number of GPUs, and GPU i's device name ("NVIDIA A100-SXM4-40GB", "sim-a100"; NULL when i is
 * out of range). Valid until prs_monitor_close. */
PRS_API int prs_monitor_gpus(const prs_monitor *m);
PRS_API const char *prs_monitor_gpu_name(const prs_monitor *m, int i);
/* 1 when GPU i is measured from power readings (its energy counter cannot be read), else 0. */
PRS_API int prs_monitor_gpu_power_mode(const prs_monitor *m, int i);

/* Open a window named name (1 to PRS_MONITOR_MAX_NAME bytes) now. PRS_EINVAL when a window of
 * that name is open or PRS_MONITOR_MAX_WINDOWS are. Never waits for the GPU. Thread-safe. */
PRS_API int prs_monitor_begin_window(prs_monitor *m, const char *name, prs_error *err);
/* Close the window named name now and write each GPU's reading to out[0..gpus) (cap >= gpus).
 * Waits for the counters to pass the end (see above). PRS_EINVAL when no such window is open or
 * cap is too small (the window then stays open); PRS_EGPU when a GPU's readings stopped (err
 * says which). Thread-safe. */
PRS_API int prs_monitor_end_window(prs_monitor *m, const char *name, prs_monitor_reading *out,
                                   int cap, prs_error *err);
/* Drop an open window without measuring it; PRS_EINVAL when none is open by that name. */
PRS_API int prs_monitor_cancel_window(prs_monitor *m, const char *name, prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
