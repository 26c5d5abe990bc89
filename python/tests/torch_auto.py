"""Client(stream="auto") on a stand-in torch module: a package named torch, first on sys.path,
with torch.cuda.is_available() and torch.cuda.current_stream().cuda_stream as PyTorch has them,
the stream being one of the tests' fake CUDA driver (on device 1 of 2, so the GPU is the
stream's, not LOCAL_RANK's). Asserts: the client asks torch for its current stream once, at
creation, and times computations on it (device time: each window is the fake kernel's 5 ms,
where host timing would see the microseconds of an asynchronous launch); with
torch.cuda.is_available() False it does not ask for a stream. Also client.other() and
other_after_last=True on the sim GPU: the optimizer step stays out of the blocked power.

usage: torch_auto.py FAKE_CUDA"""

import ctypes
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402

KERNEL_S = 0.005
STANDIN = '''"""A stand-in for PyTorch's CUDA module (tests only)."""
state = {"available": True, "stream": 0, "calls": 0}


class Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


def is_available():
    return state["available"]


def current_stream(device=None):
    state["calls"] += 1
    return Stream(state["stream"])
'''


def standin_torch(root):
    """Write the stand-in package under root and import it as torch."""
    os.mkdir(os.path.join(root, "torch"))
    with open(os.path.join(root, "torch", "__init__.py"), "w") as f:
        f.write("from . import cuda  # noqa: F401\n")
    with open(os.path.join(root, "torch", "cuda.py"), "w") as f:
        f.write(STANDIN)
    sys.path.insert(0, root)
    import torch  # noqa: PLC0415
    assert torch.cuda.__file__.startswith(root), torch.cuda.__file__
    return torch


def fake_stream(path, device):
    """A context current on this thread on device, and a stream, through the fake driver."""
    cu = ctypes.CDLL(path)
    cu.fakecuLaunchWork.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double,
                                    ctypes.c_int]
    cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    dev, ctx, stream = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0
    assert cu.cuDeviceGet(ctypes.byref(dev), device) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cu.cuCtxSetCurrent(ctx) == 0
    assert cu.cuStreamCreate(ctypes.byref(stream), 0) == 0
    return cu, stream


def mean_window_s(client, cu, stream):
    """Six iterations of one 5 ms kernel under the hooks; the mean measured window."""
    for _ in range(6):
        with client.computation("forward", 0):
            cu.fakecuLaunchWork(stream, KERNEL_S, 0.8, 0)
        cu.cuStreamSynchronize(stream)
        client.iteration_end()
    deadline = time.monotonic() + 30
    while True:  # windows are resolved once the energy readings passed them
        k = client.measured().get(("forward", 0))
        if (k and k["windows"] >= 4) or time.monotonic() > deadline:
            break
        time.sleep(0.01)  # poll interval
    assert k and k["windows"] >= 4, client.measured()
    return k["time_s"] / k["windows"]


def other_work_sim():
    """client.other() on the sim GPU: the optimizer step's energy stays out of the blocked
    power, which is then the model's exactly; a misused other() raises."""
    with perseus.Gpu("sim:a100") as g, perseus.Client(measure_only=True, gpu=g) as c:
        for _ in range(4):
            with c.computation("forward", 0):
                g.sim_run(0.005, 0.9)
            g.sim_idle(0.010)
            with c.other():
                g.sim_run(0.020, 0.4)
            c.iteration_end()
        blocked = c.measured()[("blocked", -1)]
        try:
            c.end_other()
            raise AssertionError("end_other without begin_other was accepted")
        except perseus.PerseusError as e:
            assert e.code == perseus.ErrorCode.EINVAL, e
    print(f"other work on the sim: blocked power {blocked['power_w']:.4f} W (a100: 83.64 W)")
    assert abs(blocked["power_w"] / 83.64 - 1) < 1e-6, blocked
    with perseus.Gpu("sim:a100") as g, perseus.Client(measure_only=True, gpu=g,
                                                      other_after_last=True) as c:
        for _ in range(4):  # the optimizer un-bracketed, after the last computation
            with c.computation("forward", 0):
                g.sim_run(0.005, 0.9)
            g.sim_idle(0.010)
            with c.computation("backward", 0):
                g.sim_run(0.005, 0.9)
            g.sim_run(0.020, 0.4)
            c.iteration_end()
        blocked = c.measured()[("blocked", -1)]
    print(f"other_after_last on the sim: blocked power {blocked['power_w']:.4f} W")
    assert abs(blocked["power_w"] / 83.64 - 1) < 1e-6, blocked


def main():
    other_work_sim()
    cuda = sys.argv[1]
    os.environ.pop("LOCAL_RANK", None)
    with tempfile.TemporaryDirectory() as root:
        torch = standin_torch(root)
        cu, stream = fake_stream(cuda, 1)
        torch.cuda.state["stream"] = stream.value
        with perseus.Client(measure_only=True, cuda_library=cuda, warmup_iterations=1) as c:
            assert torch.cuda.state["calls"] == 1, torch.cuda.state
            t = mean_window_s(c, cu, stream)
        print(f"stream=auto: windows of {1e3 * t:.3f} ms for {1e3 * KERNEL_S:.1f} ms kernels")
        # Device-timed: each window holds the kernel, plus the host's gap between the begin
        # event and the launch on an idle stream (longer on a busy machine), so at least the
        # kernel and far from the host-timed windows below (a launch's cost, not the kernel's).
        assert 0.98 * KERNEL_S <= t < 2 * KERNEL_S, t
        torch.cuda.state["available"] = False
        with perseus.Client(measure_only=True, cuda_library=cuda, gpu="nvml:1",
                            warmup_iterations=1) as c:
            assert torch.cuda.state["calls"] == 1, torch.cuda.state
            t = mean_window_s(c, cu, stream)
        print(f"no CUDA in torch: host-timed windows of {1e3 * t:.3f} ms")
        assert t < 0.5 * KERNEL_S, t
    print("torch stand-in: ok")


if __name__ == "__main__":
    main()
