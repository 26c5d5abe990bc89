"""An unprivileged trainer in Python (the fake NVML refuses its own clock changes): without a
perseus-gpud, Client(...) raises PerseusError saying what to do; with the node daemon, Client
starts and its clock changes go through it.

usage: gpud_start.py SOCKET  (PRS_FAKE_NVML_DENY=1 and PRS_NVML_LIBRARY set by the caller)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402


def main():
    sock = sys.argv[1]
    try:
        perseus.Client("http://127.0.0.1:9", job_id="job", token="token", gpu="nvml:0",
                       stream=False, gpud_socket="/nonexistent/gpud.sock")
    except perseus.PerseusError as e:
        msg = str(e)
        print("refused start:", msg)
        assert "refused a clock change" in msg and "start perseus-gpud" in msg, msg
    else:
        raise AssertionError("a refused clock change must fail the start")
    with perseus.Client("http://127.0.0.1:9", job_id="job", token="token", gpu="nvml:0",
                        stream=False, gpud_socket=sock) as c:
        st = c.stats()
        assert st["clock_failures"] == 0, st
    print("started through perseus-gpud at", sock)


if __name__ == "__main__":
    main()
