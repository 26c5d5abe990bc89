"""Perseus client for Python training loops (ctypes binding of include/perseus/client.h).

    import perseus
    with perseus.Client("http://10.0.0.1:7787", job_id=ID, token=TOKEN,
                        rank=r, dp=d, pp=p, gpu="nvml:0") as client:
        for step in range(steps):
            for kind, mb, chunk in perseus.order("1f1b", stages, microbatches, p):
                with client.computation(kind, mb, chunk):  # "forward" / "backward"
                    ...
            optimizer.step()
            client.iteration_end()

On a CUDA machine (PyTorch with CUDA available and an nvml GPU) the client times every
computation with CUDA events on the current stream and changes clocks with host functions
enqueued on it, so nothing waits for the GPU (stream="auto", the default; stream=False turns it
off, an integer gives a CUstream). Every request to perseusd happens on the library's background
thread. A hook that fails (a computation out of the schedule's order, a driver error) raises
PerseusError. Leaving the `with` block (or close()) posts what is queued and resets the GPU
clocks; a killed process gets its clocks reset by perseus-gpud, the node's GPU daemon through
which clock changes go (when it is not running, a private one is started with the process's own
privileges). A GPU that refuses clock changes makes Client(...) raise PerseusError with what to
do. Using a closed client raises PerseusError.

The shared library is found through $PERSEUS_LIBRARY, then build/libperseus.so of the source
tree this package sits in, then the loader's search path: libperseus.so.0 (the SONAME of an
installed libperseus, e.g. from the Debian package), what ctypes.util.find_library("perseus")
finds, then libperseus.so.
"""

import contextlib
import ctypes
import ctypes.util
import enum
import json
import os

__all__ = ["Client", "Gpu", "Monitor", "Measurement", "PerseusError", "ErrorCode", "one_f_one_b",
           "order", "load_library", "local_rank"]

FORWARD, BACKWARD = 0, 1
_INSTR = {"forward": FORWARD, "backward": BACKWARD, FORWARD: FORWARD, BACKWARD: BACKWARD}


class ErrorCode(enum.IntEnum):
    """The library's PRS_E* codes (include/perseus/error.h)."""

    EINVAL = -1
    ENOMEM = -2
    EIO = -3
    EPARSE = -4
    EFIT = -5
    EINFEASIBLE = -6
    ERANGE = -7
    ECANCELED = -8
    EGPU = -20
    ENOLIB = -21
    ESERVER = -30
    EORDER = -31


class PerseusError(RuntimeError):
    """A failed library call: .code is its ErrorCode (a plain int for a code this package does
    not know)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        try:
            self.code: int = ErrorCode(code)
        except ValueError:
            self.code = code


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


_SYNC_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Opts(ctypes.Structure):
    _fields_ = [
        ("server_url", ctypes.c_char_p),
        ("job_id", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("job_spec_json", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("dp", ctypes.c_int),
        ("pp", ctypes.c_int),
        ("tp", ctypes.c_int),
        ("gpu", ctypes.c_void_p),
        ("gpu_spec", ctypes.c_char_p),
        ("controller", ctypes.c_int),
        ("gpud_socket", ctypes.c_char_p),
        ("device_sync", _SYNC_FN),
        ("sync_user", ctypes.c_void_p),
        ("poll_interval_s", ctypes.c_double),
        ("http_timeout_s", ctypes.c_double),
        ("flush_timeout_s", ctypes.c_double),
        ("warmup_iterations", ctypes.c_int),
        ("max_queue", ctypes.c_int),
        ("use_stream", ctypes.c_int),
        ("stream", ctypes.c_size_t),
        ("cuda_library", ctypes.c_char_p),
        ("energy_poll_s", ctypes.c_double),
        ("power_poll_s", ctypes.c_double),
        ("create_token", ctypes.c_char_p),
        ("ca_file", ctypes.c_char_p),
        ("measure_only", ctypes.c_int),
        ("other_after_last", ctypes.c_int),
    ]


class _Kind(ctypes.Structure):
    _fields_ = [("chunk", ctypes.c_int), ("instr", ctypes.c_int), ("clock_min_mhz", ctypes.c_int),
                ("clock_max_mhz", ctypes.c_int), ("windows", ctypes.c_long),
                ("time_s", ctypes.c_double), ("power_w", ctypes.c_double),
                ("power_se_w", ctypes.c_double)]


class _Stats(ctypes.Structure):
    _fields_ = [
        ("phase", ctypes.c_char * 16),
        ("round", ctypes.c_long),
        ("plan_id", ctypes.c_long),
        ("clock_mhz", ctypes.c_int),
        ("iterations", ctypes.c_long),
        ("posted", ctypes.c_long),
        ("dropped", ctypes.c_long),
        ("http_failures", ctypes.c_long),
        ("clock_failures", ctypes.c_long),
        ("order_errors", ctypes.c_long),
        ("late_switches", ctypes.c_long),
        ("pace_s", ctypes.c_double),
        ("blocking_power_w", ctypes.c_double),
        ("measure_failures", ctypes.c_long),
        ("registered", ctypes.c_int),
        ("last_contact_s", ctypes.c_double),
    ]


class _Pipeline(ctypes.Structure):
    _fields_ = [("stages", ctypes.c_int), ("microbatches", ctypes.c_int),
                ("schedule", ctypes.c_int), ("unit_time_s", ctypes.c_double),
                ("blocking_power_w", ctypes.c_double), ("virtual_stages", ctypes.c_int),
                ("change_cost_s", ctypes.c_double)]


class _Work(ctypes.Structure):
    _fields_ = [("t_ref_s", ctypes.c_double), ("alpha", ctypes.c_double)]


class _Reading(ctypes.Structure):
    _fields_ = [("time_s", ctypes.c_double), ("energy_j", ctypes.c_double),
                ("estimate", ctypes.c_int)]


_MONITOR_MAX_GPUS = 64

_lib = None
# The SONAME of the installed library: its major version (CMakeLists.txt, project VERSION).
_SONAME = "libperseus.so.0"


def load_library(path=None):
    """Load libperseus.so once (see the module docstring for where it is looked for)."""
    global _lib
    if _lib is not None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [path, os.environ.get("PERSEUS_LIBRARY"),
                  os.path.join(here, "..", "..", "build", "libperseus.so"), _SONAME,
                  "find_library", "libperseus.so"]
    last = None
    for c in candidates:
        if c == "find_library":
            c = ctypes.util.find_library("perseus")
        if not c:
            continue
        try:
            lib = ctypes.CDLL(c)
            break
        except OSError as e:
            last = e
    else:
        raise PerseusError(
            -21, f"cannot load libperseus.so ({last}); install Perseus (the Debian package, or "
            "cmake --install), then point PERSEUS_LIBRARY at the library file, or add its folder "
            "to LD_LIBRARY_PATH (docs/install.md, 'Python')")
    P, I, D, V = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, None
    sig = {
        "prs_gpu_open": (I, [ctypes.c_char_p, ctypes.POINTER(P), ctypes.POINTER(_Error)]),
        "prs_gpu_close": (V, [P]),
        "prs_gpu_local_rank": (I, [ctypes.POINTER(I), ctypes.c_char_p, ctypes.c_size_t,
                                   ctypes.POINTER(_Error)]),
        "prs_gpu_name": (ctypes.c_char_p, [P]),
        "prs_gpu_backend": (ctypes.c_char_p, [P]),
        "prs_gpu_errmsg": (ctypes.c_char_p, [P]),
        "prs_gpu_clocks": (I, [P, ctypes.POINTER(I), I, ctypes.POINTER(I)]),
        "prs_gpu_now_s": (D, [P]),
        "prs_gpu_read_energy_j": (D, [P]),
        "prs_gpu_sim_clock": (I, [P, ctypes.POINTER(I)]),
        "prs_gpu_sim_run": (I, [P, ctypes.POINTER(_Work), ctypes.POINTER(D)]),
        "prs_gpu_sim_idle": (I, [P, D]),
        "prs_client_opts_init": (V, [ctypes.POINTER(_Opts)]),
        "prs_client_new": (I, [ctypes.POINTER(_Opts), ctypes.POINTER(P), ctypes.POINTER(_Error)]),
        "prs_client_begin": (I, [P, I, I, I]),
        "prs_client_end": (I, [P, I, I, I]),
        "prs_client_other_begin": (I, [P]),
        "prs_client_other_end": (I, [P]),
        "prs_strerror": (ctypes.c_char_p, [I]),
        "prs_schedule_parse": (I, [ctypes.c_char_p, ctypes.POINTER(I)]),
        "prs_pipeline_check": (I, [ctypes.POINTER(_Pipeline), ctypes.POINTER(_Error)]),
        "prs_ops_per_stage": (I, [ctypes.POINTER(_Pipeline)]),
        "prs_op_describe_chunk": (I, [ctypes.POINTER(_Pipeline), I, I, ctypes.POINTER(I),
                                      ctypes.POINTER(I), ctypes.POINTER(I)]),
        "prs_client_iteration_end": (I, [P]),
        "prs_client_free": (V, [P]),
        "prs_client_job_id": (ctypes.c_char_p, [P]),
        "prs_client_token": (ctypes.c_char_p, [P]),
        "prs_client_errmsg": (ctypes.c_char_p, [P]),
        "prs_client_get_stats": (V, [P, ctypes.POINTER(_Stats)]),
        "prs_client_abi_size": (ctypes.c_size_t, [I]),
        "prs_gpu_nvml_count": (I, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint),
                                   ctypes.POINTER(_Error)]),
        "prs_monitor_open": (I, [ctypes.POINTER(ctypes.c_char_p), I, ctypes.POINTER(P),
                                 ctypes.POINTER(_Error)]),
        "prs_monitor_close": (V, [P]),
        "prs_monitor_gpus": (I, [P]),
        "prs_monitor_gpu_name": (ctypes.c_char_p, [P, I]),
        "prs_monitor_gpu_power_mode": (I, [P, I]),
        "prs_monitor_begin_window": (I, [P, ctypes.c_char_p, ctypes.POINTER(_Error)]),
        "prs_monitor_end_window": (I, [P, ctypes.c_char_p, ctypes.POINTER(_Reading), I,
                                       ctypes.POINTER(_Error)]),
        "prs_monitor_cancel_window": (I, [P, ctypes.c_char_p, ctypes.POINTER(_Error)]),
        "prs_client_measured": (I, [P, ctypes.POINTER(_Kind), I, ctypes.POINTER(I),
                                    ctypes.POINTER(_Kind)]),
    }
    for name, (res, args) in sig.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise PerseusError(-21, f"libperseus.so lacks {name}: the library and this package "
                                    f"are different versions") from None
        fn.restype = res
        fn.argtypes = args
    _check_abi(lib)
    _lib = lib
    return lib


def _check_abi(lib):
    """Refuse a library whose structures are not laid out as this package's (another version)."""
    for which, (name, cls) in enumerate((("prs_client_opts", _Opts), ("prs_client_stats", _Stats),
                                        ("prs_pipeline", _Pipeline), ("prs_error", _Error),
                                        ("prs_gpu_work", _Work),
                                        ("prs_monitor_reading", _Reading),
                                        ("prs_client_kind", _Kind)), start=1):
        size = lib.prs_client_abi_size(which)
        if size != ctypes.sizeof(cls):
            raise PerseusError(-21, f"libperseus.so's {name} is {size} bytes, this package's "
                                    f"{ctypes.sizeof(cls)}: the library and the package are "
                                    f"different versions")


def one_f_one_b(stages, microbatches, stage):
    """The 1F1B order of one stage's computations: [("forward", 0), ...] (as perseusd plans)."""
    warm = min(stages - stage - 1, microbatches)
    order = [("forward", i) for i in range(warm)]
    for i in range(microbatches - warm):
        order += [("forward", warm + i), ("backward", i)]
    order += [("backward", i) for i in range(microbatches - warm, microbatches)]
    return order


def order(schedule, stages, microbatches, stage, virtual_stages=1):
    """The execution order of one GPU stage's computations in one iteration, as perseusd plans
    it and the client checks it: [("forward", microbatch, chunk), ...], chunk being the GPU's
    model chunk (0 unless schedule is "interleaved" with virtual_stages chunks)."""
    lib = load_library()
    kind = ctypes.c_int()
    if lib.prs_schedule_parse(schedule.encode(), ctypes.byref(kind)):
        raise PerseusError(-1, f"unknown schedule {schedule!r} (1f1b, gpipe, interleaved)")
    pipe = _Pipeline(stages, microbatches, kind.value, 1e-3, 0.0, virtual_stages)
    err = _Error()
    if lib.prs_pipeline_check(ctypes.byref(pipe), ctypes.byref(err)):
        raise PerseusError(err.code, err.msg.decode(errors="replace"))
    if not 0 <= stage < stages:
        raise PerseusError(-1, f"stage {stage} is not in 0..{stages - 1}")
    out = []
    ins, mb, ch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    for k in range(lib.prs_ops_per_stage(ctypes.byref(pipe))):
        rc = lib.prs_op_describe_chunk(ctypes.byref(pipe), stage, k, ctypes.byref(ins),
                                       ctypes.byref(mb), ctypes.byref(ch))
        if rc:
            raise PerseusError(rc, lib.prs_strerror(rc).decode())
        out.append(("forward" if ins.value == FORWARD else "backward", mb.value,
                    ch.value // stages))
    return out


def local_rank():
    """This rank's index on its node, as the client picks its GPU: $LOCAL_RANK (torchrun), else
    $SLURM_LOCALID (srun), else $OMPI_COMM_WORLD_LOCAL_RANK (Open MPI); 0 when none is set.
    Returns (index, how), how naming the variable used ("SLURM_LOCALID=3"). A value that is not
    an integer 0..1023 raises PerseusError naming the variable."""
    lib = load_library()
    index, who, err = ctypes.c_int(0), ctypes.create_string_buffer(96), _Error()
    rc = lib.prs_gpu_local_rank(ctypes.byref(index), who, len(who), ctypes.byref(err))
    if rc:
        raise PerseusError(rc, err.msg.decode(errors="replace"))
    return index.value, who.value.decode(errors="replace")


def _torch_stream():
    """The current CUDA stream of PyTorch as an integer, or None without CUDA."""
    try:
        import torch  # noqa: PLC0415 (optional dependency)
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.current_stream().cuda_stream)


class Gpu:
    """A GPU backend: "nvml" (this rank's GPU: CUDA device local_rank() under
    CUDA_VISIBLE_DEVICES), "nvml:INDEX", "nvml:uuid=GPU-...", "nvml:pci=0000:1a:00.0", "sim" or
    "sim:PRESET" (a100, a40, h100)."""

    def __init__(self, spec="nvml"):
        self._lib = load_library()
        self._h = ctypes.c_void_p()
        err = _Error()
        rc = self._lib.prs_gpu_open(spec.encode(), ctypes.byref(self._h), ctypes.byref(err))
        if rc:
            raise PerseusError(rc, err.msg.decode(errors="replace"))

    @property
    def handle(self):
        return self._h

    @property
    def name(self):
        return self._lib.prs_gpu_name(self._h).decode()

    @property
    def backend(self):
        return self._lib.prs_gpu_backend(self._h).decode()

    def clocks(self):
        n = ctypes.c_int()
        self._check(self._lib.prs_gpu_clocks(self._h, None, 0, ctypes.byref(n)))
        buf = (ctypes.c_int * n.value)()
        self._check(self._lib.prs_gpu_clocks(self._h, buf, n.value, ctypes.byref(n)))
        return list(buf)

    def now_s(self):
        return self._lib.prs_gpu_now_s(self._h)

    def energy_j(self):
        return self._lib.prs_gpu_read_energy_j(self._h)

    def sim_clock(self):
        """Locked clock of a sim GPU (0: default)."""
        f = ctypes.c_int()
        self._check(self._lib.prs_gpu_sim_clock(self._h, ctypes.byref(f)))
        return f.value

    def sim_run(self, t_ref_s, alpha):
        """A computation of the sim GPU model ran at the clock in effect; returns its time."""
        t = ctypes.c_double()
        w = _Work(t_ref_s, alpha)
        self._check(self._lib.prs_gpu_sim_run(self._h, ctypes.byref(w), ctypes.byref(t)))
        return t.value

    def sim_idle(self, seconds):
        self._check(self._lib.prs_gpu_sim_idle(self._h, ctypes.c_double(max(0.0, seconds))))

    def _check(self, rc):
        if rc:
            raise PerseusError(rc, self._lib.prs_gpu_errmsg(self._h).decode(errors="replace"))

    def close(self):
        if self._h:
            self._lib.prs_gpu_close(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """One rank's client. gpu: a Gpu (borrowed, must outlive the client) or a spec string.

    Give job_id and token, or job_spec (a dict: the POST /v1/jobs body) to create the job
    (with create_token, the server's creation token, when it has one); then .job_id and .token
    are what the other ranks need.

    stream: "auto" (default) times computations on PyTorch's current CUDA stream when CUDA is
    available and the GPU backend is nvml; an integer is a CUstream to use; False or None turns
    device timing off (then device_sync, if given, is called around every computation).
    gpud_socket: perseus-gpud's socket (default $PRS_GPUD_SOCKET or /run/perseus/gpud.sock).
    ca_file: a PEM CA bundle that verifies an https:// server (default: the system's CAs).

    other_after_last=True: the time from the iteration's last computation to its end (an
    optimizer step not in a `with client.other()`) is measured as other work, never as the GPU's
    blocking power (prs_client_opts.other_after_last). On a device stream with an energy
    counter a wait before the optimizer (an all-reduce) is fitted right; from power samples the
    tail is one power: put the optimizer in `with client.other()` there.

    measure_only=True (with server_url None): no server and no clock change, ever; every
    iteration past the warm-up is profiled at the clock the GPU runs, in any order of
    computations (chunk 0..31), and .measured() gives what was measured per kind."""

    def __init__(self, server_url=None, *, measure_only=False, job_id=None, token=None, job_spec=None, rank=0, dp=0, pp=0,
                 tp=0, gpu="nvml", device_sync=None, stream="auto", cuda_library=None,
                 poll_interval_s=None, http_timeout_s=None, flush_timeout_s=None,
                 warmup_iterations=None, max_queue=None, energy_poll_s=None, power_poll_s=None,
                 gpud_socket=None, create_token=None, ca_file=None, other_after_last=False):
        self._lib = load_library()
        self._h = ctypes.c_void_p()
        o = _Opts()
        self._lib.prs_client_opts_init(ctypes.byref(o))
        self._keep = []  # bytes and callbacks the C side points to

        def s(v):
            b = v.encode() if isinstance(v, str) else v
            self._keep.append(b)
            return b

        if server_url is not None:
            o.server_url = s(server_url)
        o.measure_only = 1 if measure_only else 0
        o.other_after_last = 1 if other_after_last else 0
        if job_id is not None:
            o.job_id, o.token = s(job_id), s(token or "")
        if job_spec is not None:
            o.job_spec_json = s(json.dumps(job_spec) if not isinstance(job_spec, str) else job_spec)
        if create_token is not None:
            o.create_token = s(create_token)
        if ca_file is not None:
            o.ca_file = s(ca_file)
        o.rank, o.dp, o.pp, o.tp = rank, dp, pp, tp
        self._gpu = gpu
        backend = gpu.backend if isinstance(gpu, Gpu) else str(gpu).split(":", 1)[0]
        if isinstance(gpu, Gpu):
            o.gpu = gpu.handle
        else:
            o.gpu_spec = s(gpu)
        if stream == "auto":
            stream = _torch_stream() if backend in ("nvml", "gpud") else None
        if stream is not None and stream is not False:
            o.use_stream, o.stream = 1, int(stream)
        if cuda_library is not None:
            o.cuda_library = s(cuda_library)
        if gpud_socket is not None:
            o.gpud_socket = s(gpud_socket)
        if device_sync is not None:
            cb = _SYNC_FN(lambda _user: device_sync())
            self._keep.append(cb)
            o.device_sync = cb
        for name, v in (("poll_interval_s", poll_interval_s), ("http_timeout_s", http_timeout_s),
                        ("flush_timeout_s", flush_timeout_s),
                        ("warmup_iterations", warmup_iterations), ("max_queue", max_queue),
                        ("energy_poll_s", energy_poll_s), ("power_poll_s", power_poll_s)):
            if v is not None:
                setattr(o, name, v)
        err = _Error()
        rc = self._lib.prs_client_new(ctypes.byref(o), ctypes.byref(self._h), ctypes.byref(err))
        if rc:
            self._h = ctypes.c_void_p()
            raise PerseusError(rc, err.msg.decode(errors="replace"))

    def _handle(self):
        if not self._h:
            raise PerseusError(-1, "the client is closed")
        return self._h

    @property
    def job_id(self):
        return self._lib.prs_client_job_id(self._handle()).decode()

    @property
    def token(self):
        return self._lib.prs_client_token(self._handle()).decode()

    def _hook(self, fn, what, kind, microbatch, chunk):
        if kind not in _INSTR:
            raise PerseusError(-1, f"{what}: kind must be 'forward' or 'backward', not {kind!r}")
        rc = fn(self._handle(), _INSTR[kind], microbatch, chunk)
        if rc:
            name = kind if isinstance(kind, str) else ("forward", "backward")[kind]
            raise PerseusError(rc, f"{what}({name}, microbatch {microbatch}, chunk {chunk}): "
                               + self._lib.prs_strerror(rc).decode())

    def begin(self, kind, microbatch, chunk=0):
        self._hook(self._lib.prs_client_begin, "begin", kind, microbatch, chunk)

    def end(self, kind, microbatch, chunk=0):
        self._hook(self._lib.prs_client_end, "end", kind, microbatch, chunk)

    @contextlib.contextmanager
    def computation(self, kind, microbatch, chunk=0):
        """with client.computation("forward", mb): run the forward of microbatch mb (of model
        chunk `chunk` with the interleaved schedule). A computation out of the schedule's
        order raises PerseusError (-31) with its window closed again, so the computations after
        it are still measured."""
        try:
            self.begin(kind, microbatch, chunk)
        except PerseusError as e:
            if e.code == ErrorCode.EORDER and self._h:  # begin opened the window all the same
                self._lib.prs_client_end(self._h, _INSTR[kind], microbatch, chunk)
            raise
        ok = False
        try:
            yield
            ok = True
        finally:
            if ok:
                self.end(kind, microbatch, chunk)
            elif self._h:
                self._lib.prs_client_end(self._h, _INSTR[kind], microbatch, chunk)

    def begin_other(self):
        """Begin GPU work outside the schedule's computations (see other())."""
        rc = self._lib.prs_client_other_begin(self._handle())
        if rc:
            raise PerseusError(rc, "begin_other: " + self._lib.prs_strerror(rc).decode())

    def end_other(self):
        rc = self._lib.prs_client_other_end(self._handle())
        if rc:
            raise PerseusError(rc, "end_other: " + self._lib.prs_strerror(rc).decode())

    @contextlib.contextmanager
    def other(self):
        """A with block around GPU work of the iteration that is no forward or backward of the
        schedule (the optimizer step, the loss, gradient clipping): measured as its own kind, so
        it never counts as the GPU's power while blocked; no clock change, no order check."""
        self.begin_other()
        try:
            yield
        finally:
            self.end_other()

    def iteration_end(self):
        """End the iteration. Raises PerseusError: with ESERVER once perseusd refused this rank for
        good (a wrong token or job id, coordinates outside the job), with the server's words."""
        h = self._handle()
        rc = self._lib.prs_client_iteration_end(h)
        if rc:
            why = self._lib.prs_client_errmsg(h).decode(errors="replace")
            raise PerseusError(rc, "iteration_end: " + (why or self._lib.prs_strerror(rc).decode()))

    def stats(self):
        st = _Stats()
        self._lib.prs_client_get_stats(self._handle(), ctypes.byref(st))
        d = {name: getattr(st, name) for name, _ in _Stats._fields_}
        d["phase"] = st.phase.decode()
        d["registered"] = bool(st.registered)
        return d

    def measured(self):
        """Measure-only mode, on the training thread: what was measured so far, as
        {(kind, chunk): {"windows", "time_s", "power_w", "power_se_w", "clock_min_mhz",
        "clock_max_mhz"}, ("blocked", -1): {"time_s", "power_w", "power_se_w"}, "why": "" or why
        the fit is not usable yet}; a power not known yet is NaN."""
        h, n, blocked = self._handle(), ctypes.c_int(), _Kind()
        rc = self._lib.prs_client_measured(h, None, 0, ctypes.byref(n), None)
        if rc:
            raise PerseusError(rc, "measured: the client is not measure-only")
        buf = (_Kind * max(n.value, 1))()
        self._lib.prs_client_measured(h, buf, n.value, ctypes.byref(n), ctypes.byref(blocked))
        out = {}
        for k in buf[:n.value]:
            out[(("forward", "backward")[k.instr], k.chunk)] = {
                name: getattr(k, name) for name in ("windows", "time_s", "power_w", "power_se_w",
                                                    "clock_min_mhz", "clock_max_mhz")}
        out[("blocked", -1)] = {"time_s": blocked.time_s, "power_w": blocked.power_w,
                                "power_se_w": blocked.power_se_w}
        out["why"] = self._lib.prs_client_errmsg(h).decode(errors="replace")
        return out

    def close(self):
        """Post what is queued (bounded), reset the clocks, stop the background thread."""
        if self._h:
            h, self._h = self._h, ctypes.c_void_p()
            self._lib.prs_client_free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Measurement:
    """What a Monitor window measured: .time (seconds), .gpu_energy {gpu: joules} and
    .estimate {gpu: bool} (True where the GPU's energy counter could not measure the window,
    e.g. one shorter than its refresh period), keyed by the position of the GPU in the Monitor's
    list."""

    def __init__(self, time, gpu_energy, estimate):
        self.time = time
        self.gpu_energy = gpu_energy
        self.estimate = estimate

    @property
    def total_energy(self):
        """Joules over all the monitor's GPUs."""
        return sum(self.gpu_energy.values())

    def __repr__(self):
        return (f"Measurement(time={self.time!r}, gpu_energy={self.gpu_energy!r}, "
                f"estimate={self.estimate!r})")


class _Window:
    """Holds a window's Measurement once its `with` block has ended (.measurement)."""

    measurement = None


class Monitor:
    """Time and energy of any code, per GPU, without a job or perseusd (include/perseus/monitor.h):

        with perseus.Monitor(["nvml:0", "nvml:1"]) as mon:
            mon.begin_window("epoch")
            train_one_epoch()
            m = mon.end_window("epoch")      # m.time, m.gpu_energy[0], m.estimate[0]
            with mon.window("eval") as w:
                evaluate()
            print(w.measurement)

    gpus: GPU specs ("nvml:INDEX", "nvml:uuid=GPU-...", "sim:a100") or NVML indices; default
    every GPU NVML lists (gpu_indices is accepted as another name for it). Windows have names;
    several may be open at once, nested or overlapping. end_window waits until the energy counters
    have moved past the window's end (up to two counter refreshes, about 0.2 s on current GPUs)."""

    def __init__(self, gpus=None, gpu_indices=None):
        self._lib = load_library()
        self._h = ctypes.c_void_p()
        gpus = gpus if gpus is not None else gpu_indices
        if gpus is None:
            n, err = ctypes.c_uint(), _Error()
            if self._lib.prs_gpu_nvml_count(None, ctypes.byref(n), ctypes.byref(err)):
                raise PerseusError(err.code, err.msg.decode(errors="replace"))
            gpus = list(range(n.value))
        specs = [g if isinstance(g, str) else f"nvml:{int(g)}" for g in gpus]
        if not specs:
            raise PerseusError(ErrorCode.EINVAL, "no GPU to monitor")
        arr = (ctypes.c_char_p * len(specs))(*[x.encode() for x in specs])
        err = _Error()
        rc = self._lib.prs_monitor_open(arr, len(specs), ctypes.byref(self._h), ctypes.byref(err))
        if rc:
            raise PerseusError(rc, err.msg.decode(errors="replace"))
        self.gpus = specs

    def _handle(self):
        if not self._h:
            raise PerseusError(ErrorCode.EINVAL, "the monitor is closed")
        return self._h

    @property
    def names(self):
        """The GPUs' device names, in order."""
        h = self._handle()
        return [self._lib.prs_monitor_gpu_name(h, i).decode() for i in range(len(self.gpus))]

    def begin_window(self, name):
        err = _Error()
        rc = self._lib.prs_monitor_begin_window(self._handle(), name.encode(), ctypes.byref(err))
        if rc:
            raise PerseusError(rc, err.msg.decode(errors="replace"))

    def end_window(self, name, cancel=False):
        """The window's Measurement (None with cancel=True, which drops it unmeasured)."""
        err = _Error()
        if cancel:
            rc = self._lib.prs_monitor_cancel_window(self._handle(), name.encode(),
                                                     ctypes.byref(err))
            if rc:
                raise PerseusError(rc, err.msg.decode(errors="replace"))
            return None
        out = (_Reading * _MONITOR_MAX_GPUS)()
        rc = self._lib.prs_monitor_end_window(self._handle(), name.encode(), out,
                                              _MONITOR_MAX_GPUS, ctypes.byref(err))
        if rc:
            raise PerseusError(rc, err.msg.decode(errors="replace"))
        n = len(self.gpus)
        return Measurement(out[0].time_s, {i: out[i].energy_j for i in range(n)},
                           {i: bool(out[i].estimate) for i in range(n)})

    @contextlib.contextmanager
    def window(self, name):
        """A window around a `with` block; the object it yields gets .measurement at the end (a
        block left by an exception drops the window)."""
        w = _Window()
        self.begin_window(name)
        try:
            yield w
        except BaseException:
            self.end_window(name, cancel=True)
            raise
        w.measurement = self.end_window(name)

    def close(self):
        if getattr(self, "_h", None):
            self._lib.prs_monitor_close(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
