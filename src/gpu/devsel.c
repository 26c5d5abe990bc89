/* Device selection: which physical GPU an nvml spec names, and which one is the calling rank's.
 *
 * Spec forms (after "nvml"): nothing (the rank's device, below), ":INDEX" (NVML order),
 * ":GPU-UUID" and ":uuid=GPU-UUID", ":pci=DOMAIN:BUS:DEV.FN". MIG instances are refused: a locked
 * SM clock is a property of the whole physical GPU, shared by every instance on it.
 *
 * The rank's device is CUDA device $LOCAL_RANK (else $SLURM_LOCALID, else
 * $OMPI_COMM_WORLD_LOCAL_RANK; 0 when none is set), mapped to the physical GPU the
 * way CUDA maps it. When the CUDA driver library loads we ask it (cuDeviceGet, cuDeviceGetUuid:
 * the driver applies CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER itself). Without it we read
 * CUDA_VISIBLE_DEVICES ourselves, with the driver's rules: unset means every GPU; entries are
 * NVML indices or GPU UUIDs, possibly abbreviated to a unique prefix; the list ends at the first
 * invalid (or repeated) entry, so an empty value, "-1" or "NoDevFiles" leaves no device. Indices
 * are taken in NVML (PCI bus) order, which is CUDA's only under CUDA_DEVICE_ORDER=PCI_BUS_ID or
 * when every GPU of the node is the same model (CUDA's default order is fastest first). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpu_int.h"

#define SPEC_FORMS                                                                                 \
    "nvml, nvml:INDEX, nvml:GPU-UUID, nvml:uuid=GPU-UUID or nvml:pci=DOMAIN:BUS:DEV.FN (e.g. "     \
    "nvml:pci=0000:1a:00.0)"

/* Digits only, at most PRS_MAX_GPU_INDEX; -1 otherwise. */
static int parse_index(const char *s, size_t len)
{
    if (len == 0 || len > 5) return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = 10 * v + (s[i] - '0');
    }
    return v <= PRS_MAX_GPU_INDEX ? v : -1;
}

/* v (the value of variable name) as a device index; see prs__gpu_parse_local_rank. */
static int parse_rank_var(const char *name, const char *v, int *index, prs_error *err)
{
    *index = 0;
    if (!v) return 0;
    int i = parse_index(v, strlen(v));
    if (i < 0)
        return prs_error_set(err, PRS_EINVAL,
                             "%s='%.40s': expected the rank's index on its node, an "
                             "integer from 0 to %d",
                             name, v, PRS_MAX_GPU_INDEX);
    *index = i;
    return 0;
}

int prs__gpu_parse_local_rank(const char *v, int *index, prs_error *err)
{
    return parse_rank_var("LOCAL_RANK", v, index, err);
}

/* The launchers' names for the rank's index on its node, in the order they are looked at:
 * torchrun and most launchers, then Slurm's srun, then Open MPI's mpirun. */
static const char *const rank_vars[] = {"LOCAL_RANK", "SLURM_LOCALID",
                                        "OMPI_COMM_WORLD_LOCAL_RANK"};

int prs_gpu_local_rank(int *index, char *who, size_t n, prs_error *err)
{
    if (!index) return prs_error_set(err, PRS_EINVAL, "local rank: no output");
    *index = 0;
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
        const char *v = getenv(rank_vars[i]);
        if (!v) continue;
        int rc = parse_rank_var(rank_vars[i], v, index, err);
        if (!rc && who && n) snprintf(who, n, "%s=%d", rank_vars[i], *index);
        return rc;
    }
    if (who && n)
        snprintf(who, n,
                 "LOCAL_RANK, SLURM_LOCALID and OMPI_COMM_WORLD_LOCAL_RANK unset: CUDA "
                 "device 0");
    return 0;
}

/* ---- PCI bus ids ---- */

/* len hex digits at s; -1 when not exactly that. */
static long hex_field(const char *s, size_t len, size_t want)
{
    if (len != want) return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isxdigit((unsigned char)s[i])) return -1;
        v = 16 * v +
            (isdigit((unsigned char)s[i]) ? s[i] - '0' : tolower((unsigned char)s[i]) - 'a' + 10);
    }
    return v;
}

int prs__gpu_pci_normalize(const char *in, char *out, size_t n, prs_error *err)
{
    const char *c1 = strchr(in, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *dot = c2 ? strchr(c2 + 1, '.') : NULL;
    long dom = -1, bus = -1, dev = -1, fn = -1;
    if (dot) {
        size_t dl = (size_t)(c1 - in);
        dom = hex_field(in, dl, dl == 4 ? 4 : 8);
        bus = hex_field(c1 + 1, (size_t)(c2 - c1 - 1), 2);
        dev = hex_field(c2 + 1, (size_t)(dot - c2 - 1), 2);
        fn = hex_field(dot + 1, strlen(dot + 1), 1);
    }
    if (dom < 0 || bus < 0 || dev < 0 || dev > 0x1f || fn < 0 || fn > 7)
        return prs_error_set(err, PRS_EINVAL,
                             "PCI bus id '%.60s': expected DOMAIN:BUS:DEVICE.FUNCTION in hex, "
                             "domain of 4 or 8 digits, bus and device of 2, function 0-7 (as "
                             "nvidia-smi --query-gpu=pci.bus_id prints it, e.g. 00000000:1A:00.0)",
                             in);
    snprintf(out, n, "%08lX:%02lX:%02lX.%lX", dom, bus, dev, fn);
    return 0;
}

/* ---- CUDA_VISIBLE_DEVICES ---- */

/* The NVML index an entry names: >= 0; -1 invalid (why says so); -2 a MIG instance. */
static int cvd_entry(const char *e, size_t len, char (*uuids)[PRS__GPU_UUID_LEN], int n, char *why,
                     size_t wn)
{
    if (len >= 4 && strncasecmp(e, "MIG-", 4) == 0) return -2;
    if (len >= 4 && strncasecmp(e, "GPU-", 4) == 0) {
        int found = -1, matches = 0;
        for (int i = 0; i < n; i++)
            if (strlen(uuids[i]) >= len && strncasecmp(uuids[i], e, len) == 0) {
                found = i;
                matches++;
            }
        if (matches == 1) return found;
        if (matches == 0)
            snprintf(why, wn, "no GPU of this node has a UUID starting with it");
        else
            snprintf(why, wn, "it is the start of %d GPUs' UUIDs (give more digits)", matches);
        return -1;
    }
    int idx = parse_index(e, len);
    if (idx >= 0 && idx < n) return idx;
    if (idx >= 0)
        snprintf(why, wn, "NVML lists %d GPUs (indices 0 to %d)", n, n - 1);
    else
        snprintf(why, wn, "neither a GPU index nor a GPU-UUID");
    return -1;
}

/* The error for an index past the devices the list makes visible. */
static int cvd_short(const char *cvd, int visible, const char *who, const char *stop, size_t slen,
                     const char *why, prs_error *err)
{
    if (!stop)
        return prs_error_set(err, PRS_EINVAL,
                             "%s: CUDA_VISIBLE_DEVICES='%.200s' makes only %d GPUs visible", who,
                             cvd, visible);
    if (visible == 0)
        return prs_error_set(err, PRS_EINVAL,
                             "%s: CUDA_VISIBLE_DEVICES='%.200s' leaves no GPU visible (its first "
                             "entry '%.*s' %s): this process has no GPU",
                             who, cvd, (int)(slen < 60 ? slen : 60), stop, why);
    return prs_error_set(err, PRS_EINVAL,
                         "%s: CUDA_VISIBLE_DEVICES='%.200s' makes only %d GPUs visible: its entry "
                         "'%.*s' %s, and CUDA ignores it and every entry after it",
                         who, cvd, visible, (int)(slen < 60 ? slen : 60), stop, why);
}

int prs__gpu_cvd_resolve(const char *cvd, int index, const char *who,
                         char (*uuids)[PRS__GPU_UUID_LEN], int n, char *out, size_t outn,
                         prs_error *err)
{
    if (!cvd) {
        if (index >= n)
            return prs_error_set(err, PRS_EINVAL,
                                 "%s: NVML lists %d GPUs on this node (CUDA_VISIBLE_DEVICES unset)",
                                 who, n);
        snprintf(out, outn, "%s", uuids[index]);
        return 0;
    }
    int seen[PRS_MAX_GPU_INDEX + 1], pos = 0;
    for (const char *e = cvd;; pos++) {
        size_t len = strcspn(e, ",");
        char why[96] = "is empty";
        int phys = len ? cvd_entry(e, len, uuids, n, why, sizeof why) : -1;
        for (int k = 0; phys >= 0 && k < pos; k++)
            if (seen[k] == phys) {
                snprintf(why, sizeof why, "names GPU %d again", phys);
                phys = -1;
            }
        if (phys == -2) {
            char what[96];
            snprintf(what, sizeof what, "CUDA_VISIBLE_DEVICES entry '%.*s'",
                     (int)(len < 60 ? len : 60), e);
            return prs__gpu_mig_refusal(err, what);
        }
        if (phys == -1) return cvd_short(cvd, pos, who, e, len, why, err);
        if (pos == index) {
            snprintf(out, outn, "%s", uuids[phys]);
            return 0;
        }
        seen[pos] = phys;
        if (e[len] == '\0' || pos == PRS_MAX_GPU_INDEX)
            return cvd_short(cvd, pos + 1, who, NULL, 0, "", err);
        e += len + 1;
    }
}

/* A MIG entry among the first index + 1 of CUDA_VISIBLE_DEVICES (the CUDA driver would hand us
 * the instance, whose clock is the whole GPU's). */
static int cvd_mig_check(const char *cvd, int index, prs_error *err)
{
    for (int pos = 0; cvd && pos <= index; pos++) {
        size_t len = strcspn(cvd, ",");
        if (len >= 4 && strncasecmp(cvd, "MIG-", 4) == 0) {
            char what[96];
            snprintf(what, sizeof what, "CUDA_VISIBLE_DEVICES entry '%.*s'",
                     (int)(len < 60 ? len : 60), cvd);
            return prs__gpu_mig_refusal(err, what);
        }
        if (cvd[len] == '\0') break;
        cvd += len + 1;
    }
    return 0;
}

/* ---- the rank's device ---- */

static int write_spec(const char *uuid, char *spec, size_t n, prs_error *err)
{
    if ((size_t)snprintf(spec, n, "nvml:uuid=%s", uuid) >= n)
        return prs_error_set(err, PRS_EINVAL, "GPU spec buffer of %zu bytes is too small", n);
    return 0;
}

/* Without the CUDA driver: CUDA_VISIBLE_DEVICES against NVML's list. */
static int rank_device_env(int index, const char *who, char *spec, size_t n, prs_error *err)
{
    char(*uuids)[PRS__GPU_UUID_LEN] = calloc(PRS_MAX_GPU_INDEX + 1, sizeof *uuids);
    if (!uuids) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int count = 0;
    char uuid[PRS__GPU_UUID_LEN];
    int rc = prs__gpu_nvml_uuids(NULL, uuids, PRS_MAX_GPU_INDEX + 1, &count, err);
    if (rc && err) {
        size_t used = strlen(err->msg);
        snprintf(err->msg + used, sizeof err->msg - used,
                 " (finding %s's GPU without the CUDA driver library, which did not load)", who);
    }
    if (count > PRS_MAX_GPU_INDEX + 1) count = PRS_MAX_GPU_INDEX + 1;
    if (!rc)
        rc = prs__gpu_cvd_resolve(getenv("CUDA_VISIBLE_DEVICES"), index, who, uuids, count, uuid,
                                  sizeof uuid, err);
    free(uuids);
    return rc ? rc : write_spec(uuid, spec, n, err);
}

int prs_gpu_rank_device_at(int cuda_index, const char *cuda_lib, char *spec, size_t n,
                           prs_error *err)
{
    if (!spec || n == 0) return prs_error_set(err, PRS_EINVAL, "GPU spec: no buffer");
    spec[0] = '\0';
    int index = cuda_index, rc = 0;
    char who[96];
    if (cuda_index < -1 || cuda_index > PRS_MAX_GPU_INDEX)
        return prs_error_set(err, PRS_EINVAL,
                             "CUDA device index %d: expected -1 (from LOCAL_RANK) or 0 to %d",
                             cuda_index, PRS_MAX_GPU_INDEX);
    if (cuda_index == -1) {
        if ((rc = prs_gpu_local_rank(&index, who, sizeof who, err)) != 0) return rc;
    } else {
        snprintf(who, sizeof who, "CUDA device %d", index);
    }
    if ((rc = cvd_mig_check(getenv("CUDA_VISIBLE_DEVICES"), index, err)) != 0) return rc;
    char uuid[PRS__GPU_UUID_LEN];
    int count = 0;
    rc = prs__gpu_cuda_device_uuid(cuda_lib, index, uuid, sizeof uuid, &count, err);
    if (rc == PRS_ENOLIB) return rank_device_env(index, who, spec, n, err);
    if (rc) return rc;
    if (index >= count) {
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        prs_error_set(err, PRS_EINVAL, "%s: CUDA sees %d GPUs (CUDA_VISIBLE_DEVICES %s%.200s%s)",
                      who, count, cvd ? "= '" : "unset", cvd ? cvd : "", cvd ? "'" : "");
        return PRS_EINVAL; /* as prs_error_set returns: visibly non-zero to analysis */
    }
    return write_spec(uuid, spec, n, err);
}

int prs_gpu_rank_device(char *spec, size_t n, prs_error *err)
{
    return prs_gpu_rank_device_at(-1, NULL, spec, n, err);
}

/* ---- specs ---- */

static int open_by_uuid(const char *spec, const char *uuid, prs_gpu **out, prs_error *err)
{
    if (strncmp(uuid, "MIG-", 4) == 0) return prs__gpu_mig_refusal(err, uuid);
    if (strncmp(uuid, "GPU-", 4) != 0 || strlen(uuid) < 5)
        return prs_error_set(err, PRS_EINVAL,
                             "GPU backend '%.80s': a UUID starts with GPU- (as nvidia-smi -L "
                             "prints it); accepted: " SPEC_FORMS,
                             spec);
    return prs__gpu_open_nvml_dev(0, uuid, NULL, NULL, out, err);
}

int prs__gpu_open_nvml_spec(const char *spec, prs_gpu **out, prs_error *err)
{
    *out = NULL;
    if (strcmp(spec, "nvml") == 0) {
        char rank_spec[PRS_GPU_SPEC_MAX];
        int rc = prs_gpu_rank_device(rank_spec, sizeof rank_spec, err);
        return rc ? rc : prs__gpu_open_nvml_spec(rank_spec, out, err);
    }
    const char *a = spec + 5; /* after "nvml:" */
    if (strncmp(a, "uuid=", 5) == 0) return open_by_uuid(spec, a + 5, out, err);
    if (strncmp(a, "GPU-", 4) == 0 || strncmp(a, "MIG-", 4) == 0)
        return open_by_uuid(spec, a, out, err);
    if (strncmp(a, "pci=", 4) == 0) {
        char pci[32];
        int rc = prs__gpu_pci_normalize(a + 4, pci, sizeof pci, err);
        return rc ? rc : prs__gpu_open_nvml_dev(0, NULL, pci, NULL, out, err);
    }
    int idx = parse_index(a, strlen(a));
    if (idx < 0)
        return prs_error_set(err, PRS_EINVAL,
                             "GPU backend '%.80s': expected " SPEC_FORMS "; an index is 0 to %d",
                             spec, PRS_MAX_GPU_INDEX);
    return prs__gpu_open_nvml_dev((unsigned)idx, NULL, NULL, NULL, out, err);
}
