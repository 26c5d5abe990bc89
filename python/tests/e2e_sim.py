"""End to end through the Python package: one pipeline of 4 stage ranks on sim GPUs, driven in
simulated time (a list scheduler runs each stage's 1F1B order; waits are idle GPU time), against
a running perseusd. Asserts: profiling and running are reached; the profile is built
from measured windows; the running plan's energy per iteration is below the all-max iteration's at
a time no more than 2 % longer; a hook out of the schedule's order raises PerseusError (-31);
clocks are reset when the clients close; a closed client raises instead of crashing; a rank given
a wrong token raises PerseusError (ESERVER) with the server's refusal from iteration_end.

usage: e2e_sim.py SERVER_URL"""

import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402

STAGES, MB = 4, 4
A100_WORK = {"forward": (0.0502, 0.85), "backward": (0.0930, 0.79)}


def work(stage, kind):
    t, a = A100_WORK[kind]
    return (t * 1.07 if stage == STAGES - 1 else t), a


def run_iteration(gpus, clients):
    order = [perseus.order("1f1b", STAGES, MB, s) for s in range(STAGES)]
    fin = {}
    nxt = [0] * STAGES
    t0 = gpus[0].now_s()
    e0 = sum(g.energy_j() for g in gpus)
    left = STAGES * 2 * MB
    while left:
        progress = False
        for s in range(STAGES):
            if nxt[s] == len(order[s]):
                continue
            kind, mb, chunk = order[s][nxt[s]]
            dep = 0.0
            if kind == "forward" and s > 0:
                dep = fin.get(("forward", s - 1, mb), -1)
            if kind == "backward" and s < STAGES - 1:
                dep = fin.get(("backward", s + 1, mb), -1)
            if dep < 0:
                continue
            gpus[s].sim_idle(dep - gpus[s].now_s())
            with clients[s].computation(kind, mb, chunk):
                gpus[s].sim_run(*work(s, kind))
            fin[(kind, s, mb)] = gpus[s].now_s()
            nxt[s] += 1
            left -= 1
            progress = True
        assert progress
    end = max(g.now_s() for g in gpus)
    for g, c in zip(gpus, clients):
        g.sim_idle(end - g.now_s())
        c.iteration_end()
    return end - t0, sum(g.energy_j() for g in gpus) - e0


def wrong_token(url, job_id, gpu):
    """A rank with a wrong token is told, by an exception with the server's words (the client
    used to give up registering in silence while training ran on)."""
    c = perseus.Client(url, job_id=job_id, token="not-the-token", rank=0, dp=0, pp=0, gpu=gpu,
                       poll_interval_s=0.01, warmup_iterations=0)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 60:
            with c.computation("forward", 0):
                gpu.sim_run(*work(0, "forward"))
            c.iteration_end()
            time.sleep(0.005)  # a training loop's pace, not a synchronisation
        raise AssertionError("a rank with a wrong token was never told")
    except perseus.PerseusError as e:
        assert e.code == perseus.ErrorCode.ESERVER, e
        assert "HTTP 401 unauthorized" in str(e) and job_id in str(e), e
        print(f"python e2e: refused as it should be: {e}")
    finally:
        c.close()


def main():
    url = sys.argv[1]
    spec = {"model": "py-e2e", "stages": STAGES, "microbatches": MB, "dp": 1,
            "clocks_mhz": list(range(1410, 1004, -45)), "blocking_power_w": 83.64,
            "reuse_frontier": False,
            "profiling": {"warmup_iterations": 1, "iterations_per_clock": 2}}
    gpus = [perseus.Gpu("sim:a100") for _ in range(STAGES)]
    clients = []
    for s in range(STAGES):
        kw = {"job_spec": spec} if s == 0 else {"job_id": clients[0].job_id,
                                               "token": clients[0].token}
        clients.append(perseus.Client(url, rank=s, dp=0, pp=s, gpu=gpus[s], poll_interval_s=0.01,
                                      http_timeout_s=2, warmup_iterations=0, **kw))
    phases, allmax, running = set(), None, []
    t_start = time.monotonic()
    while len(running) < 5 and time.monotonic() - t_start < 60:
        st = [c.stats() for c in clients]
        uniform = all(x["phase"] == st[0]["phase"] and x["round"] == st[0]["round"] for x in st)
        t, e = run_iteration(gpus, clients)
        phases.add(st[0]["phase"])
        if uniform and st[0]["phase"] == "profiling" and st[0]["round"] == 0:
            allmax = (t, e)
        if uniform and st[0]["phase"] == "running":
            running.append((t, e, st[0]["plan_id"]))
        time.sleep(0.002)
    assert "profiling" in phases and "running" in phases, phases
    assert allmax is not None
    t, e, plan = running[-1]
    print(f"python e2e: all-max {allmax[0]:.4f} s {allmax[1]:.2f} J; plan {plan}: {t:.4f} s "
          f"{e:.2f} J ({100 * (t / allmax[0] - 1):+.2f} % time, "
          f"{100 * (e / allmax[1] - 1):+.2f} % energy)")
    assert e < allmax[1], (e, allmax)
    assert t <= 1.02 * allmax[0], (t, allmax)
    req = urllib.request.Request(f"{url}/v1/jobs/{clients[0].job_id}",
                                 headers={"Authorization": f"Bearer {clients[0].token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        job = json.load(r)
    assert job["profile_source"] == "measured", job["profile_source"]
    assert all(c.stats()["posted"] > 0 for c in clients)
    assert perseus.order("1f1b", STAGES, MB, 3)[:2] == [("forward", 0, 0), ("backward", 0, 0)]
    try:  # the schedule expects stage 1's forward of microbatch 0 first
        clients[1].begin("backward", 3)
        raise AssertionError("a computation out of order was accepted")
    except perseus.PerseusError as e:
        assert e.code == -31, e
    clients[1].end("backward", 3)
    assert clients[1].stats()["order_errors"] == 1
    try:  # the same through the context manager, which closes the window it could not use
        with clients[1].computation("backward", 3):
            raise AssertionError("the body of a computation out of order ran")
    except perseus.PerseusError as e:
        assert e.code == -31, e
    try:  # so the next hook is judged on its order, not refused as a window already open (-1)
        clients[1].begin("forward", 2)
    except perseus.PerseusError as e:
        assert e.code == -31, e
    clients[1].end("forward", 2)
    job_id = clients[0].job_id
    for c in clients:
        c.close()
    try:
        clients[0].iteration_end()
        raise AssertionError("a closed client was used")
    except perseus.PerseusError:
        pass
    assert all(g.sim_clock() == 0 for g in gpus), [g.sim_clock() for g in gpus]
    wrong_token(url, job_id, gpus[0])
    for g in gpus:
        g.close()
    print("python e2e: ok")


if __name__ == "__main__":
    main()
