/* GPU backends (docs/client.md, 'GPU backends'): one interface to list the supported SM clocks,
 * lock the SM clock, reset it, and read the cumulative energy counter and the power draw of one
 * GPU.
 *
 * Backends:
 *   nvml  the NVIDIA driver's libnvidia-ml.so.1, loaded at run time with dlopen (no NVIDIA
 *         headers or libraries are needed to build); a missing library or symbol is a clean
 *         error with a message, never a crash.
 *   sim   the simulated GPU of perseus/gpumodel.h. It has a simulated clock and an
 *         energy counter that advance only when the caller says work ran (prs_gpu_sim_run) or the
 *         GPU waited (prs_gpu_sim_idle), so tests drive it deterministically. Its state is
 *         atomics, so an inline clock controller on another thread (a stream's host function)
 *         changes the clock the caller's simulated work runs at.
 *
 * A clock controller (prs_clockctl) applies clock changes off the caller's critical path: through
 * perseus-gpud (the node's daemon, or a private one), which resets the clocks when the caller
 * exits, errs or is killed, or inline (direct calls) where a clock change is cheap (sim).
 *
 * Every call returns 0 or a negative PRS_E* code; the message of the last failure is read with
 * prs_gpu_errmsg. A handle is not thread-safe: use it from one thread at a time (the sim's clock
 * and counters themselves are atomics, so a controller may set the clock concurrently). */
#ifndef PERSEUS_GPU_H
#define PERSEUS_GPU_H

#include "perseus/export.h"

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"
#include "perseus/gpumodel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes PRS_EGPU and PRS_ENOLIB: perseus/error.h. */

typedef struct prs_gpu prs_gpu;

/* Open a backend from a spec string:
 *   sim, sim:PRESET        the simulated GPU (A100 preset; gpumodel.h presets)
 *   nvml                   the calling rank's GPU: prs_gpu_rank_device below
 *   nvml:INDEX             NVML's GPU INDEX (NVML orders GPUs by PCI bus id)
 *   nvml:GPU-UUID, nvml:uuid=GPU-UUID   the GPU with that UUID (nvidia-smi -L)
 *   nvml:pci=DOMAIN:BUS:DEV.FN          the GPU at that PCI address (4- or 8-digit domain, any
 *                                       case: 0000:1a:00.0, 00000000:1A:00.0)
 * MIG instances ("MIG-..." UUIDs) and GPUs in MIG mode are refused (PRS_EINVAL): a locked SM
 * clock applies to the whole physical GPU, not to one instance. For nvml the library is
 * $PRS_NVML_LIBRARY when set, else "libnvidia-ml.so.1" from the dynamic loader's search path. On
 * failure *out is NULL and err says why. Free with prs_gpu_close. */
PRS_API int prs_gpu_open(const char *spec, prs_gpu **out, prs_error *err);
/* nvml backend for GPU index; lib_path NULL: as prs_gpu_open. */
PRS_API int prs_gpu_open_nvml(unsigned index, const char *lib_path, prs_gpu **out, prs_error *err);
/* nvml backend for the GPU with this UUID ("GPU-xxxxxxxx-...", as prs_stream_device_uuid and
 * nvidia-smi -L give it): the same physical GPU whatever CUDA_VISIBLE_DEVICES says. */
PRS_API int prs_gpu_open_nvml_uuid(const char *uuid, const char *lib_path, prs_gpu **out,
                                   prs_error *err);
/* Room for any spec prs_gpu_rank_device writes. */
#define PRS_GPU_SPEC_MAX 128

/* The calling rank's index on its node: $LOCAL_RANK (torchrun and most launchers), else
 * $SLURM_LOCALID (srun), else $OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun); 0 when none is
 * set. The first variable set decides: a value that is not an integer 0..1023 is PRS_EINVAL
 * naming it. who (n bytes, may be NULL; 96 is enough) gets the variable and value used
 * ("SLURM_LOCALID=3"), or says that none was set. */
PRS_API int prs_gpu_local_rank(int *index, char *who, size_t n, prs_error *err);

/* The spec ("nvml:uuid=GPU-...") of the calling rank's GPU: CUDA device prs_gpu_local_rank (0
 * when no launcher variable is set; a bad value is PRS_EINVAL), mapped to the physical GPU as CUDA
 * maps it under CUDA_VISIBLE_DEVICES. Asks the CUDA driver ($PRS_CUDA_LIBRARY or libcuda.so.1) when
 * it loads; otherwise reads CUDA_VISIBLE_DEVICES itself against NVML's list of GPUs, with the
 * driver's rules (indices or unique UUID prefixes; the list ends at an invalid entry), taking
 * indices in NVML (PCI) order, which is CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID. Errors name
 * the local rank's variable and CUDA_VISIBLE_DEVICES: no such device, no device visible, an
 * ambiguous UUID prefix, a MIG entry. n >= PRS_GPU_SPEC_MAX is always enough. Where the CUDA driver
 * loads, this initialises it in the calling process (cuInit), as the training framework does
 * anyway. */
PRS_API int prs_gpu_rank_device(char *spec, size_t n, prs_error *err);
/* As prs_gpu_rank_device for CUDA device cuda_index (-1: prs_gpu_local_rank), with the CUDA driver
 * library cuda_lib (NULL: $PRS_CUDA_LIBRARY, else libcuda.so.1; when it cannot be loaded,
 * CUDA_VISIBLE_DEVICES is read as above). */
PRS_API int prs_gpu_rank_device_at(int cuda_index, const char *cuda_lib, char *spec, size_t n,
                                   prs_error *err);

/* sim backend with a copy of preset (NULL: "a100"); the preset must pass prs_gpu_preset_check. */
PRS_API int prs_gpu_open_sim(const prs_gpu_preset *preset, prs_gpu **out, prs_error *err);
/* Closes the handle. Does not reset the clocks (prs_gpu_reset_clock, or a controller, does). */
PRS_API void prs_gpu_close(prs_gpu *g);

/* "nvml" or "sim" (a "gpud" spec opens an nvml GPU). */
PRS_API const char *prs_gpu_backend(const prs_gpu *g);
/* 1 when opened with a "gpud" spec: its clocks change only through the node's perseus-gpud. */
PRS_API int prs_gpu_via_gpud(const prs_gpu *g);
/* The device's name ("NVIDIA A100-SXM4-40GB", "sim-a100"). Valid while g is open. */
PRS_API const char *prs_gpu_name(const prs_gpu *g);
/* Message of the last failed call on g ("" if none). Valid until the next call on g. */
PRS_API const char *prs_gpu_errmsg(const prs_gpu *g);

/* Supported SM clocks, highest first. Writes at most cap of them to clocks_mhz (may be NULL
 * when cap is 0) and the total count to *n. */
PRS_API int prs_gpu_clocks(prs_gpu *g, int *clocks_mhz, int cap, int *n);
/* Lock the SM clock to freq_mhz (locked clocks min = max = freq_mhz). nvml needs root. */
PRS_API int prs_gpu_set_clock(prs_gpu *g, int freq_mhz);
/* Undo prs_gpu_set_clock: the driver's default clock management. */
PRS_API int prs_gpu_reset_clock(prs_gpu *g);
/* Cumulative energy since the driver was loaded (sim: since open), millijoules. */
PRS_API int prs_gpu_energy_mj(prs_gpu *g, uint64_t *energy_mj);
/* Current power draw, milliwatts (sim: the model's busy power at the current clock). */
PRS_API int prs_gpu_power_mw(prs_gpu *g, unsigned *power_mw);
/* Time source of the profiler, seconds: CLOCK_MONOTONIC for nvml, the simulated clock for sim. */
PRS_API double prs_gpu_now_s(prs_gpu *g);
/* Energy counter in joules at full resolution (sim: sub-millijoule; nvml: energy_mj / 1000).
 * Returns NAN when the counter cannot be read (the message is in prs_gpu_errmsg). */
PRS_API double prs_gpu_read_energy_j(prs_gpu *g);

/* ---- identity, read-back and memory clocks (used by perseus-gpud, docs/gpud.md) ---- */

/* Number of GPUs the NVML library sees (nvmlDeviceGetCount_v2); lib_path NULL: as
 * prs_gpu_open. */
PRS_API int prs_gpu_nvml_count(const char *lib_path, unsigned *n, prs_error *err);
/* The GPU's UUID ("GPU-xxxxxxxx-..."; sim: a synthetic "GPU-51300000-0000-0000-0000-..." id
 * unique to the handle within the process) into buf (n bytes, at least 41). */
PRS_API int prs_gpu_uuid(prs_gpu *g, char *buf, size_t n);
/* The PCI bus id ("00000000:3B:00.0") into buf (n bytes, at least 32). sim: PRS_EINVAL. */
PRS_API int prs_gpu_pci_bus_id(prs_gpu *g, char *buf, size_t n);
/* The SM clock in effect now, read back from the device (sim: the locked clock, else f_max). */
PRS_API int prs_gpu_sm_clock_now(prs_gpu *g, int *mhz);
/* Lock the memory clock at its highest supported value / undo it. nvml needs root and a driver
 * with nvmlDeviceSetMemoryLockedClocks (PRS_EGPU "not supported" otherwise); undoing it where the
 * driver or GPU has no memory locks succeeds (there is nothing to undo). sim: no-ops. */
PRS_API int prs_gpu_lock_memory_max(prs_gpu *g);
PRS_API int prs_gpu_reset_memory_clock(prs_gpu *g);

/* ---- sim backend only (PRS_EINVAL on another backend) ---- */

/* Locked SM clock in effect (0: default clock management, which runs at f_max). */
PRS_API int prs_gpu_sim_clock(prs_gpu *g, int *freq_mhz);
/* One computation of work w ran at the clock in effect: the simulated clock advances by
 * prs_gpu_time_s and the energy counter by prs_gpu_energy_j. *time_s (may be NULL) gets the time.
 */
PRS_API int prs_gpu_sim_run(prs_gpu *g, const prs_gpu_work *w, double *time_s);
/* Run-to-run noise from now on: each prs_gpu_sim_run multiplies the model's time by
 * 1 + frac * z and its energy by 1 + frac * z' (z, z' standard normal drawn from seed, clipped to
 * +-4), as a real GPU's computations vary. frac in [0, 0.2]; 0 (the default) is exact. */
PRS_API int prs_gpu_sim_set_jitter(prs_gpu *g, double frac, uint64_t seed);
/* The GPU waited seconds (>= 0) without computing: time advances, energy at blocking power. */
PRS_API int prs_gpu_sim_idle(prs_gpu *g, double seconds);
/* Number of clock changes the device applied (set and reset calls that changed the clock). */
PRS_API long prs_gpu_sim_clock_changes(prs_gpu *g);

/* ---- clock controller ---- */

typedef struct prs_clockctl prs_clockctl;

typedef enum prs_clockctl_mode {
    PRS_CLOCKCTL_INLINE = 0,  /* call the backend in the caller's thread */
    PRS_CLOCKCTL_PROCESS = 1, /* a private perseus-gpud started for this process */
    PRS_CLOCKCTL_DAEMON = 2   /* the node's perseus-gpud, at its socket */
} prs_clockctl_mode;

/* The node daemon's socket: $PRS_GPUD_SOCKET, else /run/perseus/gpud.sock. */
#define PRS_GPUD_DEFAULT_SOCKET "/run/perseus/gpud.sock"
PRS_API const char *prs_gpud_socket_path(void);
/* 1 when a socket exists at socket_path (NULL: prs_gpud_socket_path()), else 0. */
PRS_API int prs_gpud_available(const char *socket_path);

/* Start a controller for g (borrowed: g must outlive the controller). Clock changes go through
 * perseus-gpud (docs/gpud.md) in DAEMON mode (the node's daemon at socket_path, NULL: the
 * default; it checks who may control which GPU) and PROCESS mode (a private perseus-gpud started
 * with posix_spawn, with this process's privileges; the program is $PRS_GPUD, the one built or
 * installed with this library, or the first on PATH). Both take an exclusive lease on the GPU
 * (refused when another process holds it) and reset its clocks when the controller is freed and
 * whenever this process dies, however it dies. INLINE calls the backend directly (the sim
 * backend, or a root process that accepts that a crash leaves the clocks locked); DAEMON and
 * PROCESS need the nvml backend. Fails with a message that says what to do. */
PRS_API int prs_clockctl_open(prs_gpu *g, prs_clockctl_mode mode, const char *socket_path,
                              prs_clockctl **out, prs_error *err);
/* prs_clockctl_open with the default socket. */
PRS_API int prs_clockctl_new(prs_gpu *g, prs_clockctl_mode mode, prs_clockctl **out,
                             prs_error *err);
PRS_API prs_clockctl_mode prs_clockctl_mode_of(const prs_clockctl *c);
/* Request SM clock freq_mhz (0: reset to default). Never blocks: an unchanged value costs no
 * system call; DAEMON and PROCESS send one line on a non-blocking socket and the answer comes
 * later (prs_clockctl_sync, prs_clockctl_confirmed). INLINE returns the backend's result; the
 * others return 0 unless the daemon is gone (PRS_EGPU). */
PRS_API int prs_clockctl_set(prs_clockctl *c, int freq_mhz);
/* The clock last requested (0: default). */
PRS_API int prs_clockctl_requested(const prs_clockctl *c);
/* The clock in effect as the last answer says (0: default), or -1 while a request is not
 * answered yet: a measurement is tagged with a clock only once it is known to be in effect. */
PRS_API int prs_clockctl_confirmed(const prs_clockctl *c);
/* The last request sent, an id for prs_clockctl_answer (0: none, INLINE, or it could not be
 * sent). */
PRS_API long prs_clockctl_last_request(const prs_clockctl *c);
/* What request left in effect, for a caller that did not wait for it: 1 once answered, with
 * *in_effect_mhz the clock then in effect (0: default; -1: unknown, as when a later request
 * replaced it before it was applied or the daemon went away), 0 while the answer is due. INLINE
 * and request 0: prs_clockctl_confirmed, answered. */
PRS_API int prs_clockctl_answer(const prs_clockctl *c, long request, int *in_effect_mhz);
/* prs_clockctl_answer, and once answered *since_s (prs_mono_s seconds): the instant the answer
 * arrived, no earlier than the change took effect, so work that began before it may have run at
 * the previous clock (0 for INLINE and request 0: in effect before the request returned; NAN
 * when no answer is kept for request: the connection lost, or too old). */
PRS_API int prs_clockctl_answer_at(const prs_clockctl *c, long request, int *in_effect_mhz,
                                   double *since_s);
/* Requests that did not take: refused by the driver, accepted but not in effect when read back,
 * or unanswered because the daemon went away. */
PRS_API long prs_clockctl_failures(const prs_clockctl *c);
/* Daemon-side time from receiving the last applied request to the driver's return, ns (0: none
 * or INLINE). */
PRS_API long prs_clockctl_apply_ns(const prs_clockctl *c);
/* Wait (at most timeout_s) until the last request is answered. Returns 0 when it took, PRS_EGPU
 * (message in prs_gpu_errmsg) when refused, not in effect, unanswered or the daemon is gone. */
PRS_API int prs_clockctl_sync(prs_clockctl *c, double timeout_s);
/* Process id of a private perseus-gpud (0 for INLINE and DAEMON). */
PRS_API int prs_clockctl_pid(const prs_clockctl *c);
/* Reset the clocks (the lease's end: the reset is done when this returns, or the daemon does it
 * on its own), stop a private daemon (waits for it), free. NULL is a no-op. */
PRS_API void prs_clockctl_free(prs_clockctl *c);

#ifdef __cplusplus
}
#endif
#endif
