"""The client's device-stream path on a GPU, read-only (scripts/gpu-check.sh runs it).

The client runs measure-only (no server, no clock change) on the framework's CUDA stream:

  hooks     the host cost of a begin/end pair with nothing between, and of a model iteration
            with the hooks against the same iteration without them
  model     a small model's forward and backward per microbatch under the hooks: what the client
            measured per kind (time, power, the SM clock it ran at) and the blocked power
  known     work of known duration (matrix products, copies) through the client's attribution,
            each kind's fitted power against its power read off the energy counter over long
            windows of that kind alone (and the GPU idle against the fitted blocked power)

With --fake LIB the "framework" is ctypes on the tests' fake CUDA driver (its kernels are model
work of a given length and intensity), so the same path runs where there is no GPU; otherwise
PyTorch with CUDA. Writes one JSON object (--json).

usage: gpu_check_stream.py [--fake LIBCUDA] [--seconds S] [--ref-seconds R] --json OUT"""

import argparse
import ctypes
import json
import math
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import perseus  # noqa: E402

# Known work: name -> (hook kind, chunk).
KINDS = {"mm_bf16": ("forward", 0), "mm_fp32": ("backward", 0), "copy": ("forward", 1)}
FAKE_UNIT_S = 0.005  # the fake's units: kernels of two intensities, and a memset (0.8 x power)
FAKE_ALPHA = {"mm_bf16": 1.0, "mm_fp32": 0.6}


class TorchGpu:
    """PyTorch on CUDA device 0."""

    name = "torch"

    def __init__(self):
        import torch  # noqa: PLC0415 (only where a GPU is)

        self.t = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        dev = torch.device("cuda", 0)
        torch.cuda.init()
        self.stream = int(torch.cuda.current_stream().cuda_stream)
        n = 8192
        self.a16 = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        self.b16 = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        self.a32 = torch.randn(4096, 4096, device=dev)
        self.b32 = torch.randn(4096, 4096, device=dev)
        self.src = torch.empty(256 << 20, device=dev, dtype=torch.float32)  # 1 GiB
        self.dst = torch.empty_like(self.src)
        layers = [torch.nn.Linear(4096, 4096, device=dev, dtype=torch.bfloat16) for _ in range(4)]
        self.model = torch.nn.Sequential(*[m for lin in layers for m in (lin, torch.nn.GELU())])
        self.x = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        self.info = {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "device": torch.cuda.get_device_name(0)}

    def unit(self, kind):
        if kind == "mm_bf16":
            self.t.mm(self.a16, self.b16)
        elif kind == "mm_fp32":
            self.t.mm(self.a32, self.b32)
        else:
            self.dst.copy_(self.src)

    def sync(self):
        self.t.cuda.synchronize()

    def mark(self):
        e = self.t.cuda.Event()
        e.record()
        return e

    def wait(self, e):
        e.synchronize()

    def forward(self, mb):
        return self.model(self.x)

    def backward(self, out):
        out.float().pow(2).mean().backward()

    def unit_s(self, kind, reps=20):
        """Device time of one unit, from CUDA events."""
        for _ in range(3):
            self.unit(kind)
        a, b = self.t.cuda.Event(enable_timing=True), self.t.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            self.unit(kind)
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / 1e3 / reps


class FakeGpu:
    """The tests' fake CUDA driver: a unit is 5 ms of model work (a kernel of intensity
    FAKE_ALPHA[k], or a memset, which draws 0.8 times a kernel's power); the model's forward and
    backward 8 and 16 ms."""

    name = "fake"

    def __init__(self, lib):
        cu = ctypes.CDLL(lib)
        cu.fakecuLaunchWork.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double,
                                        ctypes.c_int]
        cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        cu.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t,
                                        ctypes.c_void_p]
        dev, ctx, stream = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
        assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0 and cu.cuStreamCreate(ctypes.byref(stream), 0) == 0
        self.cu, self.s = cu, stream
        self.stream = stream.value or 0
        self.words = int(FAKE_UNIT_S * 2.5e12 / 4)  # the fake's memsets write 2.5 TB/s
        self.buf = ctypes.c_uint64()
        assert cu.cuMemAlloc_v2(ctypes.byref(self.buf), ctypes.c_size_t(4 * self.words)) == 0
        self.info = {"fake_cuda": lib}

    def unit(self, kind):
        if kind == "copy":
            self.cu.cuMemsetD32Async(self.buf.value, 0, self.words, self.s)
        else:
            self.cu.fakecuLaunchWork(self.s, FAKE_UNIT_S, FAKE_ALPHA[kind], 0)

    def sync(self):
        self.cu.cuStreamSynchronize(self.s)

    def mark(self):
        e = ctypes.c_void_p()
        assert self.cu.cuEventCreate(ctypes.byref(e), 0) == 0
        assert self.cu.cuEventRecord(e, self.s) == 0
        return e

    def wait(self, e):
        self.cu.cuEventSynchronize(e)
        self.cu.cuEventDestroy_v2(e)

    def forward(self, mb):
        self.cu.fakecuLaunchWork(self.s, 0.008, 0.9, 0)
        return mb

    def backward(self, out):
        self.cu.fakecuLaunchWork(self.s, 0.016, 0.8, 0)

    def unit_s(self, kind, reps=20):
        return FAKE_UNIT_S


def client(g, cuda_lib, warmup=1):
    return perseus.Client(measure_only=True, stream=g.stream, cuda_library=cuda_lib,
                          warmup_iterations=warmup)


def spread(v):
    v = sorted(v)
    if not v:
        return {"n": 0}
    q = lambda p: v[min(len(v) - 1, int(round(p * (len(v) - 1))))]  # noqa: E731
    return {"n": len(v), "median": q(0.5), "p10": q(0.1), "p90": q(0.9), "max": v[-1]}


def hook_costs(g, cuda_lib, n=2000):
    """Host cost of a begin/end pair (each records a CUDA event) with nothing between."""
    c = client(g, cuda_lib)
    cost = []
    for rep in range(n // 50):
        t0 = time.perf_counter()
        for mb in range(50):
            c.begin("forward", mb)
            c.end("forward", mb)
        cost.append((time.perf_counter() - t0) / 50)
        c.iteration_end()
    g.sync()
    c.close()
    return {"pair_us": {k: v * 1e6 if k != "n" else v for k, v in spread(cost).items()}}


def model_iteration(g, c, mbs):
    for mb in range(mbs):
        if c:
            c.begin("forward", mb)
        out = g.forward(mb)
        if c:
            c.end("forward", mb)
            c.begin("backward", mb)
        g.backward(out)
        if c:
            c.end("backward", mb)
    if c:
        c.iteration_end()


def timed_iterations(g, c, mbs, seconds, least):
    """Iterations (each waited for, then the GPU idle for a third of it, as in an all-reduce)
    for seconds: their host times."""
    times, t_end = [], time.monotonic() + seconds
    while time.monotonic() < t_end or len(times) < least:
        t0 = time.perf_counter()
        model_iteration(g, c, mbs)
        g.sync()
        times.append(time.perf_counter() - t0)
        time.sleep(times[-1] / 3)
    return times


def model(g, cuda_lib, seconds, mbs=4):
    """The model's iterations without the client, then with it (measure-only)."""
    timed_iterations(g, None, mbs, 0, 3)  # warm-up
    plain = timed_iterations(g, None, mbs, seconds / 4, 8)
    c = client(g, cuda_lib)
    hooked = timed_iterations(g, c, mbs, seconds, 8)
    got = c.measured()
    c.close()
    mw, mo = statistics.median(hooked), statistics.median(plain)
    return {"iterations": len(hooked), "microbatches": mbs, "iteration_hooked_s": mw,
            "iteration_plain_s": mo, "hook_overhead_pct": 100 * (mw / mo - 1),
            "fit": got.pop("why") or "usable",
            "kinds": {f"{k[0]}/{k[1]}": v for k, v in got.items()}}


def wait_change(gpu, limit_s=2.0):
    """Read the counter until its value changes: (instant, value), the instant the middle of the
    two reads around the change."""
    t_prev = time.monotonic()
    e_prev = gpu.energy_j()
    end = t_prev + limit_s
    while time.monotonic() < end:
        e = gpu.energy_j()
        t = time.monotonic()
        if e != e_prev:
            return 0.5 * (t_prev + t), e
        t_prev, e_prev = t, e
    raise RuntimeError("the energy counter did not change")


def reference(g, gpu, kind, seconds, units):
    """Power of one kind alone (None: the GPU idle) from the counter over a long window: the
    window opens and closes at counter changes, inside the run."""
    t_stop = time.monotonic() + seconds
    if kind is None:
        time.sleep(0.3)
        t0, e0 = wait_change(gpu)
        time.sleep(max(0.0, t_stop - time.monotonic()))
        t1, e1 = wait_change(gpu)
        return (e1 - e0) / (t1 - t0)
    # Blocks of a quarter second, the stream kept two to three blocks ahead of the host; the
    # window opens after half a second of work and closes before the work runs out.
    block = max(1, int(0.25 / units))
    t_first, marks, opened, closed = time.monotonic(), [], None, None
    while closed is None:
        for _ in range(block):
            g.unit(kind)
        marks.append(g.mark())
        if len(marks) > 2:
            g.wait(marks.pop(0))
        now = time.monotonic()
        if opened is None and now - t_first > 0.5:
            opened = wait_change(gpu)
        elif opened and now >= t_stop:
            closed = wait_change(gpu)
    g.sync()
    return (closed[1] - opened[1]) / (closed[0] - opened[0])


def known(g, cuda_lib, seconds, ref_seconds, seed=1):
    """Known work through the client's attribution against long-window references."""
    units = {k: g.unit_s(k) for k in KINDS}
    gpu = perseus.Gpu("nvml:0")
    ref = {k: reference(g, gpu, k, ref_seconds, units[k]) for k in KINDS}
    ref["blocked"] = reference(g, gpu, None, ref_seconds, 0)
    rng = random.Random(seed)
    c = client(g, cuda_lib, warmup=2)
    n_comp, busy_s, t_end = {k: 0 for k in KINDS}, 0.0, time.monotonic() + seconds
    it = 0
    while time.monotonic() < t_end:
        for slot in range(8):
            k = rng.choice(list(KINDS))
            reps = max(1, int(rng.uniform(0.02, 0.1) / units[k]))
            if rng.random() < 0.5:  # a blocked gap before it
                g.sync()
                time.sleep(rng.uniform(0.0, 0.05))
            instr, chunk = KINDS[k]
            c.begin(instr, slot, chunk)
            for _ in range(reps):
                g.unit(k)
            c.end(instr, slot, chunk)
            n_comp[k] += 1
            busy_s += reps * units[k]
        c.iteration_end()
        it += 1
        if it % 4 == 0:
            g.sync()  # never more than a few iterations ahead
    g.sync()
    time.sleep(0.5)  # the sampler's readings past the end
    got = c.measured()
    st = c.stats()
    c.close()
    gpu.close()
    out = {"seconds": seconds, "ref_seconds": ref_seconds, "iterations": it,
           "fitted_iterations": st["posted"], "fit": got.pop("why") or "usable",
           "unit_ms": {k: 1e3 * v for k, v in units.items()}, "kinds": {}}
    for k, key in list(KINDS.items()) + [("blocked", ("blocked", -1))]:
        m = got.get(key) or {"power_w": float("nan"), "power_se_w": float("nan")}
        out["kinds"][k] = {"computations": n_comp.get(k), "reference_w": ref[k],
                           "fitted_w": m["power_w"], "se_w": m["power_se_w"],
                           "error_pct": 100 * (m["power_w"] / ref[k] - 1),
                           "clock_mhz": [m.get("clock_min_mhz"), m.get("clock_max_mhz")]}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fake", help="the tests' fake libcuda.so.1 instead of PyTorch")
    ap.add_argument("--seconds", type=float, default=60, help="known work, mixed (default 60)")
    ap.add_argument("--ref-seconds", type=float, default=4, help="each reference (default 4)")
    ap.add_argument("--model-seconds", type=float, default=20)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    g = FakeGpu(a.fake) if a.fake else TorchGpu()
    res = {"framework": g.info}
    t0 = time.monotonic()
    res["hooks"] = hook_costs(g, a.fake)
    res["model"] = model(g, a.fake, a.model_seconds)
    res["known"] = known(g, a.fake, a.seconds, a.ref_seconds)
    res["wall_s"] = time.monotonic() - t0
    res = finite(res)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


def finite(x):
    """NaN and infinities as null (JSON has none)."""
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


if __name__ == "__main__":
    main()
