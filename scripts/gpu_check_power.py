"""The power section of scripts/gpu-check.sh: what NVML's power reading is, measured against the
energy counter on the same GPU, and what the SM clock does at the default clock under work that
reaches the power limit. Read-only: it sets nothing; the load is its own matrix products.

A thread reads the power reading, the energy counter and the SM clock back to back (a sleep of
0.2 ms between rounds) while the main thread runs a pattern of PyTorch matrix products: short
bursts (150 ms on, 250 ms off: 100 ms averages swing, 1 s averages hardly do), then one long
burst (2 s, long enough to meet the power limit), then idle. Each change of the power reading is
then set against the energy counter's average power over the counter's last refresh interval
before it (and the one before that, for a reading that lags), and over the last second: the
smallest error says which average the reading is. Without torch or a GPU (--no-load) it reads
idle only, which is how CI runs it on the fake NVML.

usage: gpu_check_power.py [--nvml LIB] [--seconds S] [--no-load] --json FILE [--raw FILE]"""

import argparse
import ctypes
import json
import statistics
import threading
import time


def nvml_open(path):
    lib = ctypes.CDLL(path)
    if lib.nvmlInit_v2() != 0:
        raise RuntimeError("nvmlInit_v2 failed")
    dev = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) != 0:
        raise RuntimeError("no GPU 0")
    return lib, dev


class Field(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint),
                ("timestamp", ctypes.c_longlong), ("latencyUsec", ctypes.c_longlong),
                ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


def instant_w(lib, dev):
    """NVML's instantaneous power field (186), watts, or None where the driver lacks it."""
    f = Field(fieldId=186)
    try:
        if lib.nvmlDeviceGetFieldValues(dev, 1, ctypes.byref(f)) != 0 or f.nvmlReturn != 0:
            return None
    except AttributeError:
        return None
    if f.valueType == 0:
        return ctypes.c_double.from_buffer_copy(ctypes.c_ulonglong(f.value)).value / 1e3
    return (f.value & 0xFFFFFFFF if f.valueType in (1, 5) else f.value) / 1e3


def read_loop(lib, dev, stop, rows):
    mw, mj, mhz = ctypes.c_uint(), ctypes.c_ulonglong(), ctypes.c_uint()
    while not stop.is_set():
        t0 = time.monotonic()
        ok = lib.nvmlDeviceGetPowerUsage(dev, ctypes.byref(mw)) == 0
        t1 = time.monotonic()
        ok = lib.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(mj)) == 0 and ok
        t2 = time.monotonic()
        ok = lib.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(mhz)) == 0 and ok
        inst = instant_w(lib, dev)
        if ok:
            rows.append((t0, t1, t2, mw.value / 1e3, mj.value / 1e3, mhz.value,
                         -1.0 if inst is None else inst))
        time.sleep(0.0002)


def load(seconds, mark):
    import torch  # only where a GPU is

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def burst(on_s):
        mark.append(("on", time.monotonic()))
        end = time.monotonic() + on_s
        while time.monotonic() < end:
            for _ in range(4):
                torch.mm(a, b)
            torch.cuda.synchronize()
        mark.append(("off", time.monotonic()))

    time.sleep(0.5)
    for _ in range(int(max(1, (seconds - 4) / 0.4))):
        burst(0.15)
        time.sleep(0.25)
    burst(2.0)
    time.sleep(1.5)


def changes(rows, col, at_col):
    """(instant, value) of each change of a column; the instant is the read's."""
    out = []
    for prev, cur in zip(rows, rows[1:]):
        if cur[col] != prev[col]:
            out.append((cur[at_col], cur[col]))
    return out


def energy_avg(energy, t, back):
    """Average power from the counter's changes: over the BACK-th interval between changes that
    ends at or before T (back 0: the last), or None."""
    done = [i for i, (at, _) in enumerate(energy) if at <= t]
    if len(done) < back + 2:
        return None
    i = done[-1 - back]
    (t0, e0), (t1, e1) = energy[i - 1], energy[i]
    return (e1 - e0) / (t1 - t0) if t1 > t0 else None


def energy_avg_span(energy, t, span):
    done = [(at, e) for at, e in energy if at <= t]
    old = [(at, e) for at, e in done if at <= t - span]
    if not old or not done or done[-1][0] <= old[-1][0]:
        return None
    return (done[-1][1] - old[-1][1]) / (done[-1][0] - old[-1][0])


def compare(rows):
    power = changes(rows, 3, 0)
    energy = changes(rows, 4, 1)
    # A power change within 1 ms of the one before is a step of it: keep the last step.
    merged = []
    for at, v in power:
        if merged and at - merged[-1][0] < 1e-3:
            merged[-1] = (at, v)
        else:
            merged.append((at, v))
    hyp = {"last_refresh": lambda t: energy_avg(energy, t, 0),
           "refresh_before": lambda t: energy_avg(energy, t, 1),
           "last_1s": lambda t: energy_avg_span(energy, t, 1.0)}
    err = {}
    for name, f in hyp.items():
        e = [abs(v - ref) / ref * 100 for at, v in merged for ref in [f(at)] if ref and ref > 1]
        err[name] = {"median_abs_pct": statistics.median(e) if e else None, "n": len(e)}
    # The instantaneous field, at each of the counter's changes: against the counter's last
    # refresh interval (an instant reading is closer to it than to the last second).
    inst = {}
    if rows and rows[-1][6] >= 0:
        at_e = [(r[2], r[6]) for r in rows]
        for name, f in (("last_refresh", hyp["last_refresh"]), ("last_1s", hyp["last_1s"])):
            e = []
            for t, _ in energy[2:]:
                near = [v for at, v in at_e if t - 0.05 <= at <= t]
                ref = f(t)
                if near and ref and ref > 1:
                    e.append(abs(statistics.mean(near) - ref) / ref * 100)
            inst[name] = {"median_abs_pct": statistics.median(e) if e else None, "n": len(e)}
    gaps = [b[0] - a[0] for a, b in zip(merged, merged[1:])]
    egaps = [b[0] - a[0] for a, b in zip(energy, energy[1:])]
    return {"power_changes": len(merged),
            "power_interval_ms": statistics.median(gaps) * 1e3 if gaps else None,
            "energy_interval_ms": statistics.median(egaps) * 1e3 if egaps else None,
            "reading_vs_energy": err, "instant_field_vs_energy": inst or None,
            "best": min((k for k in err if err[k]["median_abs_pct"] is not None),
                        key=lambda k: err[k]["median_abs_pct"], default=None)}


def clocks(rows, marks):
    """SM clock and power read during the long burst's last second, and idle at the end."""
    out = {}
    ons = [t for k, t in marks if k == "on"]
    offs = [t for k, t in marks if k == "off"]
    if ons and offs:
        late = [r for r in rows if offs[-1] - 1.0 <= r[0] <= offs[-1]]
        if late:
            out["long_burst_clock_mhz"] = [min(r[5] for r in late), max(r[5] for r in late)]
            out["long_burst_power_w"] = statistics.median(r[3] for r in late)
        idle = [r for r in rows if r[0] >= offs[-1] + 1.0]
        if idle:
            out["idle_clock_mhz"] = statistics.median(r[5] for r in idle)
    if rows:
        out["clock_seen_mhz"] = [min(r[5] for r in rows), max(r[5] for r in rows)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvml", default="libnvidia-ml.so.1")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--no-load", action="store_true")
    ap.add_argument("--json", required=True)
    ap.add_argument("--raw")
    o = ap.parse_args()
    lib, dev = nvml_open(o.nvml)
    limit = ctypes.c_uint()
    try:
        has_limit = lib.nvmlDeviceGetEnforcedPowerLimit(dev, ctypes.byref(limit)) == 0
    except AttributeError:  # a driver without it
        has_limit = False
    rows, marks, stop = [], [], threading.Event()
    th = threading.Thread(target=read_loop, args=(lib, dev, stop, rows))
    th.start()
    try:
        if o.no_load:
            time.sleep(o.seconds)
        else:
            load(o.seconds, marks)
    finally:
        stop.set()
        th.join()
    out = {"load": not o.no_load, "reads": len(rows),
           "power_limit_w": limit.value / 1e3 if has_limit else None}
    out.update(compare(rows))
    out.update(clocks(rows, marks))
    with open(o.json, "w") as f:
        json.dump(out, f, indent=1)
    if o.raw:
        with open(o.raw, "w") as f:
            f.write("t_power_s,t_energy_s,t_clock_s,power_w,energy_j,sm_mhz,instant_w\n")
            for r in rows:
                f.write(",".join(f"{x:.6f}" if isinstance(x, float) else str(x) for x in r) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
