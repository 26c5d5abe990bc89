/* The client's life cycle (perseus/client.h): options, start (GPU backend, clock controller,
 * background thread), statistics and shutdown. The hooks are in hooks.c and measure.c, the
 * background thread in net.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "perseus/clock.h"
#include "perseus/monitor.h"

#define PROBE_TIMEOUT_S 5.0

void prs_client_opts_init(prs_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gpu_spec = "nvml";
    o->controller = -1;
    o->poll_interval_s = 0.5;
    o->http_timeout_s = 5;
    o->flush_timeout_s = 2;
    o->warmup_iterations = 1;
    o->max_queue = 4096;
    o->energy_poll_s = 0.002;
    o->power_poll_s = 0.1;
}

static int copy_str(char *dst, size_t n, const char *src, const char *what, prs_error *err)
{
    if (!src) {
        dst[0] = '\0';
        return 0;
    }
    if (strlen(src) >= n) return prs_error_set(err, PRS_EINVAL, "%s is too long", what);
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

static void client_destroy(prs_client *c)
{
    prs__client_dev_close(c); /* before the controller: the stream's clock calls use it */
    if (c->ctl) prs_clockctl_free(c->ctl);
    if (c->own_gpu) prs_gpu_close(c->gpu);
    if (c->sampler_gpu) prs_gpu_close(c->sampler_gpu);
    for (int i = 0; c->queue && i < c->q_len; i++)
        prs__client_iteration_free(&c->queue[(c->q_head + i) % c->opts.max_queue]);
    free(c->queue);
    free(c->ops);
    prs__client_expect_free(c);
    prs__client_schedule_free(&c->cur);
    prs__client_schedule_free(&c->next);
    prs__client_schedule_free(&c->latest);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* Device-stream measurement: the sampler reads the energy counter on a GPU handle of its own
 * (the clock controller's calls come from the driver's thread). */
static int open_stream(prs_client *c, prs_stream *stream, prs_error *err)
{
    if (c->gpu_exact) {
        prs_stream_close(stream);
        return prs_error_set(
            err, PRS_EINVAL,
            "client: the sim backend has no device stream (use_stream needs nvml)");
    }
    if (!c->opts.gpu) {
        int rc = prs_gpu_open(c->gpu_spec, &c->sampler_gpu, err);
        if (rc) {
            prs_stream_close(stream);
            return rc;
        }
    }
    return prs__client_dev_open(c, stream, c->sampler_gpu ? c->sampler_gpu : c->gpu, err);
}

/* The default spec "nvml" is the rank's own GPU: with a device stream, the stream's CUDA device
 * (found in NVML by UUID); otherwise CUDA device $LOCAL_RANK as CUDA_VISIBLE_DEVICES maps it
 * (prs_gpu_rank_device), so every rank of a node measures and controls its own GPU. */
static int default_gpu_spec(prs_client *c, prs_stream *stream, prs_error *err)
{
    int gpud = strcmp(c->gpu_spec, "gpud") == 0; /* the same, through perseus-gpud */
    if (c->opts.gpu || (strcmp(c->gpu_spec, "nvml") != 0 && !gpud)) return 0;
    char uuid[64];
    int rc = 0, index = 0;
    if (stream && prs_stream_device_uuid(stream, uuid, sizeof uuid) == 0) {
        snprintf(c->gpu_spec, sizeof c->gpu_spec, "nvml:uuid=%s", uuid);
        c->spec_from_stream = 1;
    } else if ((rc = prs_gpu_local_rank(&index, c->rank_who, sizeof c->rank_who, err)) == 0)
        rc = prs_gpu_rank_device_at(index, c->opts.cuda_library, c->gpu_spec, sizeof c->gpu_spec,
                                    err);
    if (!rc && gpud) memcpy(c->gpu_spec, "gpud", 4); /* "nvml:uuid=..." -> "gpud:uuid=..." */
    return rc;
}

/* NVML does not list the stream's CUDA device as a GPU: a MIG instance, which CUDA names by a
 * UUID of its own, is the likely cause (NVML alone would say only "Not Found"). */
static int stream_gpu_unknown(prs_client *c, int rc, prs_error *err)
{
    char msg[PRS_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return prs_error_set(err, rc,
                         "client: the CUDA stream's device (%.60s) is not a GPU NVML lists: a MIG "
                         "instance? MIG is not supported: a locked SM clock applies to the whole "
                         "physical GPU, shared by all its MIG instances; give each rank a whole "
                         "GPU (nvidia-smi -i GPU -mig 0, then reset it) (%.200s)",
                         c->gpu_spec + 10, msg);
}

static int stream_first(prs_client *c, prs_stream **stream, prs_error *err)
{
    *stream = NULL;
    int rc = 0;
    if (c->opts.use_stream)
        rc = prs_stream_open_cuda(c->opts.stream, c->opts.cuda_library, stream, err);
    return rc ? rc : default_gpu_spec(c, *stream, err);
}

/* A clock the GPU would refuse fails the start, with what to do, rather than a run whose
 * profile is tagged with clocks that never were: lock the highest clock once and reset. */
static int probe_refused(prs_client *c, prs_error *err)
{
    const char *how =
        prs_clockctl_mode_of(c->ctl) == PRS_CLOCKCTL_DAEMON
            ? "check perseus-gpud's log (journalctl -u perseus-gpud)"
            : "start perseus-gpud on this node (systemctl start perseus-gpud) and allow this "
              "user in /etc/perseus/gpud.conf, or run as root";
    return prs_error_set(err, PRS_EGPU, "client: the GPU refused a clock change (%s): %s",
                         prs_gpu_errmsg(c->gpu), how);
}

/* A GPU that accepts a lock but goes on at its highest clock (a vGPU, a board whose clocks an
 * administrator pinned) would profile every clock at the highest one and save nothing: a lock
 * below the highest must read back, else the start fails naming the GPU and the clock. */
static int probe_lower(prs_client *c, int low_mhz, prs_error *err)
{
    int rc = prs_clockctl_set(c->ctl, low_mhz);
    if (!rc) rc = prs_clockctl_sync(c->ctl, PROBE_TIMEOUT_S);
    if (!rc) return 0;
    char why[256], uuid[96] = "?";
    snprintf(why, sizeof why, "%s", prs_gpu_errmsg(c->gpu));
    (void)prs_gpu_uuid(c->gpu, uuid, sizeof uuid);
    return prs_error_set(err, PRS_EGPU,
                         "client: GPU %s (%s) did not take a lock of its SM clock at %d MHz, "
                         "below its highest (%d MHz): %s; Perseus needs a GPU that runs at the "
                         "clock it locks (not a vGPU, application clocks not restricted: "
                         "nvidia-smi -i GPU -acp UNRESTRICTED)",
                         uuid, prs_gpu_name(c->gpu), low_mhz, c->f_max_mhz, why);
}

/* The start's probe: the highest clock (refused: no rights), the next one down (ignored: a GPU
 * that does not apply locks), then the default clocks. */
static int probe_clock(prs_client *c, int low_mhz, prs_error *err)
{
    if (c->gpu_exact || c->f_max_mhz <= 0) return 0;
    int rc = prs_clockctl_set(c->ctl, c->f_max_mhz);
    if (!rc) rc = prs_clockctl_sync(c->ctl, PROBE_TIMEOUT_S);
    if (rc) return probe_refused(c, err);
    if (low_mhz > 0 && low_mhz < c->f_max_mhz && (rc = probe_lower(c, low_mhz, err)) != 0) {
        (void)prs_clockctl_set(c->ctl, 0);
        (void)prs_clockctl_sync(c->ctl, PROBE_TIMEOUT_S);
        return rc;
    }
    rc = prs_clockctl_set(c->ctl, 0);
    if (!rc) rc = prs_clockctl_sync(c->ctl, PROBE_TIMEOUT_S);
    return rc ? probe_refused(c, err) : 0;
}

/* err's message, followed by how the rank's GPU was chosen (who: prs_gpu_local_rank's). */
static int which_gpu(int rc, const char *who, prs_error *err)
{
    char msg[PRS_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return prs_error_set(err, rc,
                         "%.300s (this rank's GPU: %s; the local rank is read from LOCAL_RANK, "
                         "else SLURM_LOCALID, else OMPI_COMM_WORLD_LOCAL_RANK)",
                         msg, who);
}

/* The clock controller: the node's perseus-gpud when its socket exists, else a private one (the
 * process's own privileges); inline for the sim backend. Then the probe. */
static int start_controller(prs_client *c, prs_error *err)
{
    int n = 0, top[2] = {0, 0};
    if (prs_gpu_clocks(c->gpu, top, 2, &n) == 0 && n > 0) c->f_max_mhz = top[0];
    c->gpu_exact = strcmp(prs_gpu_backend(c->gpu), "sim") == 0;
    int mode = c->opts.controller;
    if (mode < 0)
        mode = c->gpu_exact ? PRS_CLOCKCTL_INLINE
               : prs_gpu_via_gpud(c->gpu) || prs_gpud_available(c->opts.gpud_socket)
                   ? PRS_CLOCKCTL_DAEMON
                   : PRS_CLOCKCTL_PROCESS;
    if (mode != PRS_CLOCKCTL_DAEMON && prs_gpu_via_gpud(c->gpu))
        return prs_error_set(err, PRS_EINVAL,
                             "client: a gpud GPU spec changes clocks only through perseus-gpud "
                             "(controller must be -1 or DAEMON)");
    int rc = prs_clockctl_open(c->gpu, (prs_clockctl_mode)mode, c->opts.gpud_socket, &c->ctl, err);
    if (rc && c->rank_who[0] && err) /* a lease refused: often every rank took the same GPU */
        return which_gpu(rc, c->rank_who, err);
    return rc ? rc : probe_clock(c, n > 1 ? top[1] : 0, err);
}

/* Measure only: neither a server nor a clock controller (the other options as usual). */
static int check_measure_only(const prs_client_opts *o, prs_error *err)
{
    if (o->server_url || o->job_id || o->token || o->job_spec_json || o->create_token)
        return prs_error_set(err, PRS_EINVAL,
                             "client: measure_only runs without a server: leave server_url, "
                             "job_id, token and job_spec_json unset");
    return 0;
}

int prs_client_new(const prs_client_opts *o, prs_client **out, prs_error *err)
{
    *out = NULL;
    if (o && o->measure_only) {
        int rc = check_measure_only(o, err);
        if (rc) return rc;
    } else if (!o || !o->server_url || !*o->server_url)
        return prs_error_set(err, PRS_EINVAL, "client: server_url is required");
    if (!o->measure_only && strncmp(o->server_url, "http://", 7) != 0 &&
        strncmp(o->server_url, "https://", 8) != 0)
        return prs_error_set(err, PRS_EINVAL,
                             "client: server_url must start with http:// or https://, got '%.64s'",
                             o->server_url);
    if (!o->measure_only && !o->job_spec_json && (!o->job_id || !o->token))
        return prs_error_set(err, PRS_EINVAL, "client: give job_id and token, or job_spec_json");
    if (o->rank < 0 || o->dp < 0 || o->pp < 0 || o->tp < 0)
        return prs_error_set(err, PRS_EINVAL, "client: rank and coordinates must be >= 0");
    if (!(o->poll_interval_s > 0) || !(o->http_timeout_s > 0) || !(o->flush_timeout_s >= 0) ||
        o->warmup_iterations < 0 || o->max_queue < 1 || o->controller < -1 || o->controller > 2 ||
        (o->use_stream && (!(o->energy_poll_s > 0) || !(o->power_poll_s > 0))))
        return prs_error_set(err, PRS_EINVAL, "client: bad option value");
    prs__client_global_init();
    prs_client *c = calloc(1, sizeof *c);
    if (!c) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    prs_sync_init_mono(&c->mu, &c->cv);
    c->opts = *o;
    int rc = copy_str(c->url, sizeof c->url, o->server_url, "server_url", err);
    if (!rc) rc = copy_str(c->job_id, sizeof c->job_id, o->job_id, "job_id", err);
    if (!rc) rc = copy_str(c->token, sizeof c->token, o->token, "token", err);
    if (!rc)
        rc = copy_str(c->gpud_socket, sizeof c->gpud_socket, o->gpud_socket, "gpud_socket", err);
    if (!rc) rc = copy_str(c->ca_file, sizeof c->ca_file, o->ca_file, "ca_file", err);
    size_t ul = strlen(c->url);
    while (ul > 0 && c->url[ul - 1] == '/')
        c->url[--ul] = '\0';
    c->opts.server_url = c->url;
    c->opts.job_id = c->job_id;
    c->opts.token = c->token;
    c->opts.gpud_socket = c->gpud_socket[0] ? c->gpud_socket : NULL;
    c->opts.ca_file = c->ca_file[0] ? c->ca_file : NULL;
    c->opts.job_spec_json = NULL;
    c->cur.plan_id = c->latest.plan_id = c->next.plan_id = -1;
    c->stats.plan_id = -1;
    c->queue = rc ? NULL : calloc((size_t)o->max_queue, sizeof *c->queue);
    if (!rc && !c->queue) rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
    if (!rc && o->measure_only) prs__client_local_init(c);
    if (!rc && !o->job_id && !o->measure_only) {
        /* The creation is the one request that carries the server's creation token. */
        c->opts.job_spec_json = o->job_spec_json;
        rc = copy_str(c->token, sizeof c->token, o->create_token, "create_token", err);
        if (!rc) rc = prs__client_create_job(c, err);
        if (rc) c->token[0] = '\0';
        c->opts.job_spec_json = NULL;
    }
    c->opts.create_token = NULL;
    prs_stream *stream = NULL;
    if (!rc)
        rc = copy_str(c->gpu_spec, sizeof c->gpu_spec, o->gpu_spec ? o->gpu_spec : "nvml",
                      "gpu_spec", err);
    if (!rc) rc = stream_first(c, &stream, err);
    if (!rc) {
        if (o->gpu) {
            c->gpu = o->gpu;
        } else {
            rc = prs_gpu_open(c->gpu_spec, &c->gpu, err);
            c->own_gpu = rc == 0;
            if (rc && c->spec_from_stream && err) rc = stream_gpu_unknown(c, rc, err);
        }
    }
    if (!rc) rc = o->measure_only ? prs__client_local_gpu(c) : start_controller(c, err);
    if (!rc && stream) {
        rc = open_stream(c, stream, err);
        stream = NULL; /* the client's now, freed with it */
    }
    if (!rc && !o->measure_only) {
        if (pthread_create(&c->thread, NULL, prs__client_thread_main, c) != 0)
            rc = prs_error_set(err, PRS_ENOMEM, "client: cannot start its thread");
        else
            c->thread_started = 1;
    }
    if (rc) {
        prs_stream_close(stream);
        client_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

void prs_client_free(prs_client *c)
{
    if (!c) return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    client_destroy(c); /* frees the controller: the clocks are reset */
}

const char *prs_client_job_id(const prs_client *c)
{
    return c->job_id;
}

const char *prs_client_token(const prs_client *c)
{
    return c->token;
}

size_t prs_client_abi_size(int which)
{
    switch (which) {
    case PRS_ABI_CLIENT_OPTS:
        return sizeof(prs_client_opts);
    case PRS_ABI_CLIENT_STATS:
        return sizeof(prs_client_stats);
    case PRS_ABI_PIPELINE:
        return sizeof(prs_pipeline);
    case PRS_ABI_ERROR:
        return sizeof(prs_error);
    case PRS_ABI_GPU_WORK:
        return sizeof(prs_gpu_work);
    case PRS_ABI_MONITOR_READING:
        return sizeof(prs_monitor_reading);
    case PRS_ABI_CLIENT_KIND:
        return sizeof(prs_client_kind);
    default:
        return 0;
    }
}

void prs_client_get_stats(prs_client *c, prs_client_stats *s)
{
    pthread_mutex_lock(&c->mu);
    *s = c->stats;
    pthread_mutex_unlock(&c->mu);
    s->clock_failures = atomic_load_explicit(&c->clock_failures, memory_order_relaxed) +
                        (c->ctl ? prs_clockctl_failures(c->ctl) : 0);
    s->clock_mhz = atomic_load_explicit(&c->clock_mhz, memory_order_relaxed);
    s->order_errors = atomic_load_explicit(&c->order_errors, memory_order_relaxed);
    s->late_switches = atomic_load_explicit(&c->late_switches, memory_order_relaxed);
    s->measure_failures = atomic_load_explicit(&c->measure_failures, memory_order_relaxed);
}

int prs__client_refused(prs_client *c)
{
    int rc = atomic_load_explicit(&c->refused, memory_order_acquire);
    if (rc) snprintf(c->errmsg, sizeof c->errmsg, "%s", c->refused_msg);
    return rc;
}

const char *prs_client_errmsg(prs_client *c)
{
    return c ? c->errmsg : "";
}
