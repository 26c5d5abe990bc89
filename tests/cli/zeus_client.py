#!/usr/bin/python3
"""Zeus's pipeline-frequency clients, as the tests of perseusd's Zeus-compatible routes need them
(standard library only).

  zeus_client.py replay EXCHANGE.jsonl URL
      Send every request of a recorded exchange, in its order (a rank's blocking schedule in a
      thread of its own), and check each answer's status and shape against the recorded one.
  zeus_client.py artifact URL RANK STATE_DIR
      One rank of the artifact's client (register_rank, then schedule/result rounds until the
      schedule answers HTTP 500 with [profiling-done], at most 240 s) on a simulated GPU whose
      truth is truth() below; with RANK 0 it also
      registers the job and writes its id to STATE_DIR/job. Writes the clocks of each schedule
      to STATE_DIR/rankR.clocks, one round a line.
  zeus_client.py master URL RANK JOB
      One rank of Zeus master's client: register_rank/JOB, then one blocking schedule, printed.
  zeus_client.py fuzz URL N
      N requests with one thing wrong to every route of a one-rank job: each is answered 200, or
      4xx with a message; never 5xx.
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request


def call(url, method, path, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text.decode(errors="replace")


def shape_ok(got, want, where):
    """The answer has the recorded answer's shape: same JSON types, same keys, lists of the same
    length whose instruction names match; [profiling-done] where the recording has it."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{where}: keys {sorted(got) if isinstance(got, dict) else got!r} != {sorted(want)}"
        for k in want:
            if k == "detail":
                if ("[profiling-done]" in want[k]) != ("[profiling-done]" in str(got[k])):
                    return f"{where}: detail {got[k]!r} lacks [profiling-done]"
                continue
            if k in ("scheduler", "scheduler_args", "dump_dir"):
                if type(got[k]) is not type(want[k]):
                    return f"{where}.{k}: type"
                continue
            err = shape_ok(got[k], want[k], f"{where}.{k}")
            if err:
                return err
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: list of {len(got) if isinstance(got, list) else got!r}, want {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            if isinstance(w, str):
                if g != w:
                    return f"{where}[{i}]: {g!r} != {w!r}"
            else:
                err = shape_ok(g, w, f"{where}[{i}]")
                if err:
                    return err
        return None
    if isinstance(want, bool) or want is None:
        return None if type(got) is type(want) else f"{where}: {got!r} is not like {want!r}"
    if isinstance(want, (int, float)):
        ok = isinstance(got, (int, float)) and not isinstance(got, bool)
        return None if ok else f"{where}: {got!r} is not a number"
    if isinstance(want, str):
        return None if isinstance(got, str) else f"{where}: {got!r} is not a string"
    return f"{where}: unexpected recorded value {want!r}"


def replay(path, url):
    entries = [json.loads(line) for line in open(path)]
    entries.sort(key=lambda e: e["seq"])
    ids = {}  # recorded job id -> ours
    pending = {}  # rank -> (thread, result holder) of its blocking schedule
    failures = []

    def check(e, status, body):
        if status != e["status"]:
            failures.append(f"seq {e['seq']} {e['method']} {e['path']}: status {status} "
                            f"(recorded {e['status']}): {body!r}"[:600])
            return
        err = shape_ok(body, e["resp_body"], f"seq {e['seq']}")
        if err:
            failures.append(err[:600])

    def translate(text):
        for old, new in ids.items():
            text = text.replace(old, new)
        return text

    for e in entries:
        p = translate(e["path"])
        body = e["req_body"]
        if isinstance(body, dict) and "rank" in body and body["rank"] in pending:
            t, box = pending.pop(body["rank"])
            t.join(300)
        if body is not None:
            body = json.loads(translate(json.dumps(body)))
        if e["method"] == "GET" and p.startswith("/schedule/"):
            rank = int(p.rsplit("rank=", 1)[1])
            if rank in pending:
                t, box = pending.pop(rank)
                t.join(300)
            box = {}

            def run(e=e, p=p, box=box):
                box["ans"] = call(url, "GET", p)
                check(e, *box["ans"])

            t = threading.Thread(target=run)
            t.start()
            pending[rank] = (t, box)
            continue
        status, ans = call(url, e["method"], p, body)
        check(e, status, ans)
        if p == "/register_job" and status == 200:
            ids[e["resp_body"]] = ans
    for t, _ in pending.values():
        t.join(300)
        if t.is_alive():
            failures.append("a schedule never came back")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    print(f"{len(entries)} requests replayed, {len(failures)} mismatches")
    return 1 if failures else 0


# ---- a simulated rank of the artifact's client ----

STAGES, MICROBATCHES, CLOCKS = 4, 4, list(range(1410, 1199, -15))
ITERS = 3


def pipe_schedule(stage):
    """Merak's 1F1B pipe schedule: computations between loads, p2p and the optimizer step."""
    warm = min(STAGES - stage - 1, MICROBATCHES)
    comps = ["forward"] * warm
    for _ in range(MICROBATCHES - warm):
        comps += ["forward", "backward"]
    comps += ["backward"] * warm
    out = []
    for c in comps:
        out += (["load"] if stage in (0, STAGES - 1) and c == "forward" else ["p2p"]) + [c]
    return out + ["cc", "cc", "step"]


def truth(stage, instr, mhz):
    """The simulated GPU: time falls with the clock, energy has a static and a dynamic part."""
    base = (0.05 if instr == "forward" else 0.1) * (1 + 0.1 * stage)
    t = base * (1410 / mhz) ** 0.8
    p = 80 + 220 * (mhz / 1410) ** 2
    return t, t * p


def run_iteration(stage, sched, clocks, first):
    comp = [c for c in sched if c in ("forward", "backward")]
    times = {"forward": [], "backward": [], "load": []}
    energies = {"forward": [], "backward": [], "load": []}
    k = 0
    for entry, mhz in zip(sched, clocks):
        if entry in ("forward", "backward"):
            t, e = truth(stage, entry, mhz)
            times[entry].append(t)
            energies[entry].append(e)
            k += 1
        elif entry == "load":
            times["load"].append(0.002)
    assert k == len(comp)
    if first:  # a real first iteration reports M + 1 forwards
        times["forward"].insert(0, 0.5)
        energies["forward"].insert(0, 200.0)
    busy_t = sum(times["forward"][-MICROBATCHES:]) + sum(times["backward"])
    busy_e = sum(energies["forward"][-MICROBATCHES:]) + sum(energies["backward"])
    idle = 0.2
    return busy_t + idle, busy_e + idle * 90.0, times, energies


def artifact(url, rank, state):
    stage = rank
    if rank == 0:
        st, job = call(url, "POST", "/register_job", {
            "job_id": "", "pp_degree": STAGES, "dp_degree": 1, "tp_degree": 1,
            "world_size": STAGES, "framework": "merak", "model_name": "synthetic",
            "partition_method": "uniform_transformer", "microbatch_size": 4,
            "num_microbatches": MICROBATCHES})
        assert st == 200 and isinstance(job, str), (st, job)
        with open(os.path.join(state, "job.tmp"), "w") as f:
            f.write(job)
        os.rename(os.path.join(state, "job.tmp"), os.path.join(state, "job"))
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(state, "job")):
        assert time.monotonic() < deadline, "no job id"
        time.sleep(0.02)
    job = open(os.path.join(state, "job")).read()
    sched = pipe_schedule(stage)
    st, ans = call(url, "POST", "/register_rank", {
        "job_id": job, "rank": rank, "dp_rank": 0, "pp_rank": stage, "tp_rank": 0,
        "pipe_schedule": sched, "power_state_range": CLOCKS})
    assert st == 200 and ans is None, (st, ans)
    log = open(os.path.join(state, f"rank{rank}.clocks"), "w")
    first = True
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        st, ans = call(url, "GET", f"/schedule/{job}?rank={rank}")
        if st == 500 and "[profiling-done]" in str(ans.get("detail")):
            return 0
        assert st == 200 and ans["rank"] == rank and len(ans["power_states"]) == len(sched), ans
        clocks = ans["power_states"]
        log.write(" ".join(map(str, clocks)) + "\n")
        log.flush()
        res = {"rank": rank, "iter_time": [], "iter_energy": [],
               "time_breakdown": {"forward": [], "backward": [], "load": []},
               "energy_breakdown": {"forward": [], "backward": [], "load": []}}
        for _ in range(ITERS):
            t, e, tb, eb = run_iteration(stage, sched, clocks, first)
            first = False
            res["iter_time"].append(t)
            res["iter_energy"].append(e)
            for k in tb:
                res["time_breakdown"][k].append(tb[k])
            for k in ("forward", "backward"):
                res["energy_breakdown"][k].append(eb[k])
        st, ans = call(url, "POST", f"/result/{job}", res)
        assert st == 200 and ans is None, (st, ans)
        time.sleep(0.01)  # the simulated iterations' own time, so that a run lasts a while
    print("never told to stop", file=sys.stderr)
    return 1


def master(url, rank, job):
    st, ans = call(url, "POST", f"/register_rank/{job}", {
        "rank": rank, "dp_rank": 0, "pp_rank": rank, "tp_rank": 0,
        "available_frequencies": list(range(1410, 209, -15))})
    assert st == 200 and ans is None, (st, ans)
    st, ans = call(url, "GET", f"/schedule/{job}?rank={rank}")
    assert st == 200, (st, ans)
    print(json.dumps(ans))
    return 0


# ---- bad input ----

def mutate(rng, body):
    """body with one thing wrong: a field of another type or out of range, a field missing or
    added, a list entry changed."""
    odd = [None, -1, 2**63, 1e308, -0.5, "x" * 300, "", [], {}, [[]], True, "\u0001", 1.5]
    b = json.loads(json.dumps(body))
    keys = list(b)
    k = rng.choice(keys)
    r = rng.random()
    if r < 0.4:
        b[k] = rng.choice(odd)
    elif r < 0.55:
        del b[k]
    elif r < 0.65:
        b[rng.choice(["extra", "rank", "iter_time", "time_breakdown"])] = rng.choice(odd)
    elif isinstance(b[k], list) and b[k]:
        b[k][rng.randrange(len(b[k]))] = rng.choice(odd)
    elif isinstance(b[k], dict) and b[k]:
        kk = rng.choice(list(b[k]))
        b[k][kk] = rng.choice(odd + [[[rng.choice(odd)]]])
    else:
        b[k] = rng.choice(odd)
    return b


def fuzz(url, n):
    """n mutated requests to every route of a one-rank job (its v1 job created after two rounds):
    each answered 200 or 4xx with a detail message, never 5xx, and the server stays up."""
    import random
    rng = random.Random(40)
    st, job = call(url, "POST", "/register_job", {
        "pp_degree": 1, "dp_degree": 1, "tp_degree": 1, "world_size": 1, "num_microbatches": 2})
    assert st == 200, (st, job)
    rank = {"job_id": job, "rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
            "pipe_schedule": ["load", "forward", "backward", "forward", "backward", "step"],
            "power_state_range": [1410, 1395, 1380]}
    assert call(url, "POST", "/register_rank", rank)[0] == 200
    result = {"rank": 0, "iter_time": [0.5, 0.5], "iter_energy": [100.0, 100.0],
              "time_breakdown": {"forward": [[0.1, 0.1], [0.1, 0.1, 0.1]],
                                 "backward": [[0.2, 0.2], [0.2, 0.2]]},
              "energy_breakdown": {"forward": [[20.0, 20.0], []],
                                   "backward": [[40.0, 40.0], [40.0, 40.0]]}}
    job_info = {"pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2,
                "num_microbatches": 2, "model_name": "m"}
    master = {"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0,
              "available_frequencies": [1410, 1395]}
    bad = []
    for i in range(n):
        if i % 7 == 0:  # the job moves on: warm-up rounds, then profiling with a v1 job
            call(url, "GET", f"/schedule/{job}?rank=0")
        which = i % 5
        if which == 0:
            st, ans = call(url, "POST", f"/result/{job}", mutate(rng, result))
        elif which == 1:
            st, ans = call(url, "POST", "/register_rank", mutate(rng, rank))
        elif which == 2:
            st, ans = call(url, "POST", "/register_job", mutate(rng, job_info))
        elif which == 3:
            st, ans = call(url, "POST", f"/register_rank/{job}", mutate(rng, master))
        else:
            q = rng.choice(["", "?rank=", "?rank=-1", "?rank=1", "?rank=1e3", "?rank=99999999999"])
            st, ans = call(url, "GET", f"/schedule/{job}{q}")
        ok = st == 200 or (400 <= st < 500 and isinstance(ans, dict) and
                           isinstance(ans.get("detail"), str) and ans["detail"])
        if not ok:
            bad.append(f"request {i} (kind {which}): {st} {ans!r}"[:300])
    st, _ = call(url, "GET", "/info")
    if st != 200:
        bad.append("the server stopped answering")
    for b in bad:
        print("FAIL:", b, file=sys.stderr)
    print(f"{n} mutated requests, {len(bad)} answered wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "fuzz":
        sys.exit(fuzz(sys.argv[2], int(sys.argv[3])))
    cmd = sys.argv[1]
    if cmd == "replay":
        sys.exit(replay(sys.argv[2], sys.argv[3]))
    if cmd == "artifact":
        sys.exit(artifact(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    if cmd == "master":
        sys.exit(master(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    sys.exit(f"unknown command {cmd}")
