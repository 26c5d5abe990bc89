"""perseus.Monitor on simulated GPUs (which a monitor keeps idle, drawing their blocking power):
nested and overlapping windows measure that power over their time within 1 %, a window with
nothing in it is flagged an estimate, a window left by an exception is dropped, and every misuse
raises PerseusError. argv: the blocking power of sim:a100 and of sim:h100, in watts (as
`perseus show-env` prints them)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402


def check(m, powers, what):
    assert len(m.gpu_energy) == len(powers), m
    for i, p in enumerate(powers):
        want = p * m.time
        assert not m.estimate[i], f"{what}: GPU {i} flagged an estimate: {m}"
        assert abs(m.gpu_energy[i] / want - 1) < 0.01, f"{what}: GPU {i}: {m}, want {want} J"
    print(f"{what}: {m.time:.3f} s, {m.gpu_energy}")


def main():
    powers = [float(x) for x in sys.argv[1:3]]
    with perseus.Monitor(["sim:a100", "sim:h100"]) as mon:
        assert mon.names == ["sim-a100", "sim-h100"], mon.names
        mon.begin_window("outer")
        time.sleep(0.3)  # the workload: the simulated GPUs idle meanwhile
        mon.begin_window("inner")
        time.sleep(0.5)
        mon.begin_window("across")
        check(mon.end_window("inner"), powers, "inner")
        time.sleep(0.2)
        outer = mon.end_window("outer")
        check(outer, powers, "outer")
        assert outer.time > 1.0 and outer.total_energy > outer.gpu_energy[0], outer
        time.sleep(0.3)
        check(mon.end_window("across"), powers, "across")

        with mon.window("empty") as w:
            pass
        assert all(w.measurement.estimate.values()), w.measurement

        try:
            with mon.window("dropped"):
                raise KeyError("boom")
        except KeyError:
            pass
        mon.begin_window("dropped")  # the name is free again
        assert mon.end_window("dropped", cancel=True) is None

        for bad in (lambda: mon.end_window("never"), lambda: mon.begin_window("")):
            try:
                bad()
            except perseus.PerseusError as e:
                assert e.code == perseus.ErrorCode.EINVAL, e
            else:
                raise AssertionError("misuse must raise")
        mon.begin_window("twice")
        try:
            mon.begin_window("twice")
        except perseus.PerseusError as e:
            assert "already open" in str(e), e
        else:
            raise AssertionError("a second window of one name must raise")
    try:
        mon.begin_window("closed")
    except perseus.PerseusError as e:
        assert e.code == perseus.ErrorCode.EINVAL, e
    else:
        raise AssertionError("a closed monitor must raise")
    try:
        perseus.Monitor(["nope"])
    except perseus.PerseusError as e:
        assert "GPU 0 (nope)" in str(e), e
    else:
        raise AssertionError("a bad GPU must raise")
    print("monitor_sim: ok")


if __name__ == "__main__":
    main()
