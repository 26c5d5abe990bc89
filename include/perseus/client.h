/* The Perseus client: called from each rank's training loop, it measures every forward and
 * backward computation, sets the SM clock the server planned before each one, and talks to
 * perseusd (docs/api.md) without ever blocking training.
 *
 * Use, per rank, on the thread where the model's CUDA context is current:
 *   prs_client_opts o; prs_client_opts_init(&o);
 *   o.server_url = "http://10.0.0.1:7787"; o.job_id = ID; o.token = TOKEN;
 *   o.rank = r; o.dp = d; o.pp = p;
 *   o.use_stream = 1; o.stream = (uintptr_t)stream;   // the CUstream the model runs on
 *   prs_client_new(&o, &c, &err);
 *   for each iteration:
 *     for each computation of the stage, in schedule order:
 *       prs_client_begin(c, PRS_FORWARD, mb, chunk); ... launch on the stream ...;
 *       prs_client_end(c, PRS_FORWARD, mb, chunk);
 *     prs_client_other_begin(c); ... optimizer step ...; prs_client_other_end(c);
 *     prs_client_iteration_end(c);
 *   prs_client_free(c);   // posts what is pending (bounded wait), resets the clocks
 *
 * Measurement (docs/measurement.md): on a device stream, CUDA events time every computation and
 * energy is attributed from the GPU's energy counter (or power readings) over many computations;
 * nothing waits for the GPU. Without a stream (the sim backend), the backend is read at the hooks.
 *
 * Threads: the hooks (begin, end, iteration_end) are called from one training thread; they take
 * no network action and at most one uncontended lock (iteration_end). A background thread
 * registers the rank, polls the schedule and posts results in batches over HTTP (libcurl); its
 * latest schedule is adopted at an iteration boundary (a running plan at the iteration the server
 * set for the whole pipeline), so every iteration runs one schedule. When the server is
 * unreachable training goes on with the schedule in hand and results queue (bounded: when the
 * queue is full the newest iterations are dropped) until it is back.
 *
 * Clocks: the k-th computation of an iteration runs at clocks_mhz[k] of the schedule, changed by a
 * host function enqueued just before it on the stream (at the hook without one); in phases without
 * clocks (registering) the GPU keeps its default; `done`/`failed` reset it. Clock changes go
 * through a clock controller (perseus/gpu.h): perseus-gpud for nvml (the node's daemon, so the
 * training process needs no privilege, or a private one), inline for sim. A window is tagged
 * with the clock the controller confirmed in effect; one whose clock is not confirmed is not
 * reported. The clocks are reset by prs_client_free, and by perseus-gpud when the process dies. */
#ifndef PERSEUS_CLIENT_H
#define PERSEUS_CLIENT_H

#include "perseus/export.h"

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"
#include "perseus/gpu.h"
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error code PRS_ESERVER: perseus/error.h. */

typedef struct prs_client prs_client;

/* Wait until the device finished the work launched so far (cudaDeviceSynchronize), so a window's
 * end time and energy include the computation. user is prs_client_opts.sync_user. */
typedef void (*prs_device_sync_fn)(void *user);

typedef struct prs_client_opts {
    const char *server_url; /* "http://HOST:PORT" of perseusd, or "https://..." (ca_file);
                             * required */
    /* Join a job: its id and token (POST /v1/jobs answer). Or create it: job_spec_json (the
     * POST /v1/jobs body) with job_id NULL; prs_client_new then creates the job (blocking, once)
     * and prs_client_job_id/token give what the other ranks need. Strings are copied. */
    const char *job_id;
    const char *token;
    const char *job_spec_json;
    int rank;             /* global rank, < dp * stages * tp */
    int dp, pp, tp;       /* data-, pipeline- and tensor-parallel coordinates */
    prs_gpu *gpu;         /* GPU backend, borrowed (must outlive the client); NULL: open gpu_spec */
    const char *gpu_spec; /* prs_gpu_open spec when gpu is NULL; default "nvml" */
    /* Clock controller (perseus/gpu.h): -1 (default) picks INLINE for sim, else DAEMON when the
     * node's perseus-gpud socket exists, else PROCESS (a private perseus-gpud with this
     * process's privileges). */
    int controller;
    const char *gpud_socket; /* perseus-gpud's socket; NULL: $PRS_GPUD_SOCKET or the default */
    prs_device_sync_fn device_sync; /* NULL: no sync (CPU-only or sim) */
    void *sync_user;
    double poll_interval_s; /* least time between server round trips; default 0.5 */
    double http_timeout_s;  /* per request; default 5 */
    double flush_timeout_s; /* prs_client_free waits this long to post what is queued; 2 */
    int warmup_iterations;  /* first iterations of the process not reported; default 1 */
    int max_queue;          /* iterations kept while the server is away; default 4096 */
    /* Device stream (docs/measurement.md). With use_stream, computations are timed by CUDA
     * events on `stream` (a CUstream as an integer, e.g. PyTorch's
     * torch.cuda.current_stream().cuda_stream; 0: the legacy default stream) of the CUDA context
     * current on the calling thread, clocks change by host functions in stream order, energy is
     * attributed from the energy counter (or power samples) over many computations, and nothing
     * waits for the device. The hooks must then be called on this same thread. device_sync is
     * ignored. */
    int use_stream;
    uintptr_t stream;
    const char *cuda_library; /* NULL: $PRS_CUDA_LIBRARY, else libcuda.so.1 */
    double energy_poll_s;     /* energy counter polling period; default 0.002 */
    double power_poll_s;      /* power sampling period without an energy counter; default 0.1 */
    const char *create_token; /* the server's creation token (perseusd --create-token), sent
                               * when creating the job from job_spec_json; NULL: none */
    const char *ca_file;      /* PEM CA bundle that verifies an https:// server_url (perseusd
                               * --tls-cert); NULL: the system's CAs */
    /* Measure only (docs/measurement.md, 'Measure only'): no clock controller, no clock change
     * ever asked for, no server. server_url, job_id, token and job_spec_json must be NULL. Every
     * iteration past warmup_iterations is profiled at whatever clock the GPU runs (each window
     * tagged with the SM clock read at its iteration's start) and its windows are summed per
     * kind for prs_client_measured. Hooks take chunk 0..PRS_CLIENT_MAX_CHUNKS-1, in any order. */
    int measure_only;
    /* GPU work nobody bracketed (prs_client_other_begin/end): 1 takes everything from the end of
     * an iteration's last computation to its end (the gradient all-reduce, the optimizer step,
     * the loss) as other work, in iterations without other-work windows, so an un-bracketed
     * optimizer never counts as blocking; the GPU's blocking power is then measured in the
     * bubbles between computations and, on a device stream with an energy counter, in the
     * tails too: a tail is fitted as the blocking power over it plus a fixed energy, so a wait
     * of any length before the optimizer (an all-reduce) is right. From power samples the tail is
     * one power, wrong when it waits first (docs/measurement.md): bracket the optimizer there. 0
     * (the default): that time counts as blocking, unless bracketed. */
    int other_after_last;
} prs_client_opts;

PRS_API void prs_client_opts_init(prs_client_opts *o);

/* Start a client: opens the GPU (unless given), starts the clock controller and checks that the
 * GPU takes a clock change (it locks the highest clock once and resets it: a GPU that refuses
 * fails the start with PRS_EGPU and a message that says what to do), then the background
 * thread. Fails (PRS_EINVAL, PRS_ENOLIB, PRS_EGPU, PRS_ESERVER when creating a job fails) with
 * *out NULL and a message in err. Registration happens in the background: an unreachable server
 * is not an error here. */
PRS_API int prs_client_new(const prs_client_opts *o, prs_client **out, prs_error *err);

/* Begin and end one computation: the forward or backward of microbatch mb of this GPU's model
 * chunk `chunk` (0 unless the schedule is interleaved; then 0..virtual_stages-1, Megatron-LM's
 * model chunk id). begin sets the clock planned for this position of the iteration and opens a
 * window; end closes it. Once the server sent the pipeline's schedule, every hook is checked
 * against the position the schedule expects: a computation out of order returns PRS_EORDER, is
 * counted in order_errors, and its iteration reports no windows (never a misassigned one).
 * Returns 0, PRS_EINVAL when misused (end without begin, end of another computation), or
 * PRS_EORDER. Clock failures are counted, not returned. */
PRS_API int prs_client_begin(prs_client *c, prs_instr instr, int microbatch, int chunk);
PRS_API int prs_client_end(prs_client *c, prs_instr instr, int microbatch, int chunk);

/* Begin and end GPU work of the iteration outside the schedule's computations: the optimizer
 * step, the loss, gradient clipping, embedding updates. Bracket it like a computation (same
 * thread, never inside a computation's window, any number per iteration). It is measured as a
 * kind of its own, so its power never counts as the GPU's power while blocked (un-bracketed, a
 * 20 ms optimizer kernel in a 0.58 s iteration raised the measured blocking power by 22 %). It
 * keeps the clock in effect, is not checked against the schedule's order, is not reported as a
 * computation and is not part of the rank's pace. Returns 0, or PRS_EINVAL when misused (a
 * window already open; an end without its begin). */
PRS_API int prs_client_other_begin(prs_client *c);
PRS_API int prs_client_other_end(prs_client *c);
/* End of an iteration (after the optimizer step): queue its time, energy and windows for the
 * background thread, and adopt the newest schedule. */
PRS_API int prs_client_iteration_end(prs_client *c);
/* A refusal for good: when perseusd refuses the rank's registration (a wrong token, an unknown
 * job id, a rank that does not fit the job: HTTP 400, 401, 403, 404 or 409), every later
 * prs_client_iteration_end returns PRS_ESERVER (the iteration is still measured), the refusal is
 * logged once on stderr (a logfmt line at level error), and prs_client_errmsg says why, with the
 * server's own message. */
/* The words of the last error a call on c returned (PRS_ESERVER from iteration_end: the
 * server's refusal), "" when none; valid until the next call on c from the same thread. */
PRS_API const char *prs_client_errmsg(prs_client *c);

/* Stop the background thread after a last post (at most flush_timeout_s), reset the clocks,
 * close what the client opened. NULL is a no-op. */
PRS_API void prs_client_free(prs_client *c);

/* Measure-only mode: what the reported iterations measured, summed per kind of computation. */
#define PRS_CLIENT_MAX_CHUNKS 32
typedef struct prs_client_kind {
    int chunk;                        /* as the hooks gave it (-1: the time blocked) */
    int instr;                        /* PRS_FORWARD or PRS_BACKWARD (-1: blocked) */
    int clock_min_mhz, clock_max_mhz; /* SM clocks its windows were tagged with (0: unknown) */
    long windows;                     /* computations counted */
    double time_s;                    /* their total time */
    double power_w;    /* its power (NAN until known): on a device stream the attribution's fit
                        * over every iteration so far, at the hooks energy / time */
    double power_se_w; /* the fit's standard error of power_w (NAN: none; 0 at the hooks) */
} prs_client_kind;

/* Measure-only mode (opts.measure_only): the kinds measured so far, in (chunk, instr) order;
 * fills at most max of them and sets *n to how many there are; blocked (may be NULL) gets the
 * time between computations and the power while blocked. Call it from the training thread (on a
 * device stream it first takes in what the device completed, then solves the fit; when the fit
 * is not usable yet the powers are its current estimates or NAN, and prs_client_errmsg says
 * why). Returns 0, or PRS_EINVAL when c is not measure-only. */
PRS_API int prs_client_measured(prs_client *c, prs_client_kind *kinds, int max, int *n,
                                prs_client_kind *blocked);

/* The job's id and token (valid for the client's life). */
PRS_API const char *prs_client_job_id(const prs_client *c);
PRS_API const char *prs_client_token(const prs_client *c);

/* What the client knows (a snapshot; safe from any thread). */
typedef struct prs_client_stats {
    char phase[16];          /* phase of the schedule in effect ("" before the first one) */
    long round;              /* its round */
    long plan_id;            /* its plan (-1: none) */
    int clock_mhz;           /* clock requested for the last computation (0: default) */
    long iterations;         /* iterations ended */
    long posted;             /* iterations the server acknowledged */
    long dropped;            /* iterations dropped (queue full, or refused by the server) */
    long http_failures;      /* requests that got no answer */
    long clock_failures;     /* clock changes that did not take (refused, not in effect) */
    long order_errors;       /* hooks out of the schedule's order */
    long late_switches;      /* plans adopted after the iteration the server set for them */
    double pace_s;           /* last iteration: its start to the end of its last computation */
    double blocking_power_w; /* last estimate of the GPU's power while blocked (0: none) */
    long measure_failures;   /* iterations whose device timing could not be read */
    int registered;          /* the server accepted the rank */
    double last_contact_s;   /* CLOCK_MONOTONIC of the last answer from the server (0: never) */
} prs_client_stats;

PRS_API void prs_client_get_stats(prs_client *c, prs_client_stats *s);

/* For bindings that lay the structures out themselves (the Python package, ctypes): the size in
 * bytes of each structure they pass, so a binding built for another version refuses to load
 * instead of corrupting memory. which: PRS_ABI_CLIENT_OPTS, PRS_ABI_CLIENT_STATS,
 * PRS_ABI_PIPELINE, PRS_ABI_ERROR, PRS_ABI_GPU_WORK, PRS_ABI_MONITOR_READING (perseus/monitor.h),
 * PRS_ABI_CLIENT_KIND; 0 for anything else. */
enum {
    PRS_ABI_CLIENT_OPTS = 1,
    PRS_ABI_CLIENT_STATS = 2,
    PRS_ABI_PIPELINE = 3,
    PRS_ABI_ERROR = 4,
    PRS_ABI_GPU_WORK = 5,
    PRS_ABI_MONITOR_READING = 6,
    PRS_ABI_CLIENT_KIND = 7
};
PRS_API size_t prs_client_abi_size(int which);

#ifdef __cplusplus
}
#endif
#endif
