"""The Python package on the device-stream path, against the tests' fake CUDA driver and NVML:
one rank (a 1-stage job) whose "framework" is ctypes on the fake libcuda.so.1, as PyTorch would be
on a real one. Its computations are fake kernels enqueued on a stream; the client is given that
stream (stream=int) and the default GPU spec, so it finds its GPU in NVML by the CUDA device's
UUID. Asserts: the job goes through profiling to running with a measured profile and blocking
power; no order errors or clock failures; a hook out of order raises PerseusError (-31); a closed
client raises.

usage: stream_fake.py SERVER_URL FAKE_CUDA"""

import ctypes
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402

MB = 4
WORK = {"forward": (0.010, 0.8), "backward": (0.020, 0.85)}


def fake_cuda(path):
    """A context current on this thread and a stream, through the fake driver."""
    cu = ctypes.CDLL(path)
    cu.fakecuLaunchWork.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double,
                                    ctypes.c_int]
    cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    dev, ctx, stream = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0
    assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    assert cu.cuStreamCreate(ctypes.byref(stream), 0) == 0
    return cu, stream


def get(url, token):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def main():
    url, cuda = sys.argv[1], sys.argv[2]
    cu, stream = fake_cuda(cuda)
    spec = {"model": "py-stream", "stages": 1, "microbatches": MB, "dp": 1,
            "clocks_mhz": [1410, 1200], "reuse_frontier": False,
            "profiling": {"warmup_iterations": 1, "iterations_per_clock": 2}}
    c = perseus.Client(url, job_spec=spec, rank=0, dp=0, pp=0, stream=stream.value or 0,
                       cuda_library=cuda, poll_interval_s=0.05, warmup_iterations=0)
    order = perseus.order("1f1b", 1, MB, 0)
    t0, phase = time.monotonic(), ""
    while time.monotonic() - t0 < 120:
        for kind, mb, chunk in order:
            with c.computation(kind, mb, chunk):
                cu.fakecuLaunchWork(stream, *WORK[kind], 0)
        cu.cuStreamSynchronize(stream)
        time.sleep(0.02)  # the GPU waits, as in an all-reduce
        c.iteration_end()
        phase = get(f"{url}/v1/jobs/{c.job_id}", c.token)["phase"]
        if phase in ("running", "failed"):
            break
    job = get(f"{url}/v1/jobs/{c.job_id}", c.token)
    assert job["phase"] == "running", job.get("reason", job["phase"])
    assert job["profile_source"] == "measured"
    bp = job["blocking_power"]
    print(f"python stream: running after {time.monotonic() - t0:.1f} s; blocking power measured "
          f"{bp['measured_w']:.2f} W (fake GPU: 83.64 W)")
    assert bp["spec_w"] is None and abs(bp["measured_w"] / 83.64 - 1) < 0.1, bp
    st = c.stats()
    assert st["order_errors"] == 0 and st["clock_failures"] == 0, st
    assert st["posted"] > 0, st
    try:
        c.begin("backward", MB - 1)  # the schedule expects forward 0 first
        raise AssertionError("a computation out of order was accepted")
    except perseus.PerseusError as e:
        assert e.code == -31, e
    c.end("backward", MB - 1)
    c.close()
    try:
        c.stats()
        raise AssertionError("a closed client was used")
    except perseus.PerseusError:
        pass
    print("python stream: ok")


if __name__ == "__main__":
    main()
