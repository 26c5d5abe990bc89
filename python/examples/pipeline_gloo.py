"""Pipeline-parallel training with Perseus: torch.distributed (gloo, CPU), 1F1B with isend/irecv,
a small transformer-like model, one process per (pipeline, stage), on the `sim` GPU backend.

    python3 pipeline_gloo.py --server http://127.0.0.1:7787 [--stages 4] [--dp 2] [--json OUT]

Every process is one rank: it computes its stage for real (CPU) and tells its sim GPU the
computation ran (perseus.Gpu.sim_run, with the stage's modelled work), so the energy and the time
the Perseus client measures are the simulated GPU's. Messages between stages carry the sender's
simulated finish time and the receiver's GPU idles until then; the iteration ends with the
data-parallel gradient all-reduce and a barrier on simulated time, so every rank's iteration time
is the pipeline's. Rank 0 creates the job; the job goes through profiling, planning and running;
then rank 0 reports the last pipeline as a straggler (its computations made slower by --straggler)
to perseusd, and clears it again (recovery). With --json, rank 0 writes the measured figures.
"""

import argparse
import json
import os
import sys
import time
import urllib.request

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402

D_MODEL, SEQ, BATCH, VOCAB = 32, 8, 4, 64
A100_WORK = {"forward": (0.0502, 0.85), "backward": (0.0930, 0.79)}  # gpumodel.h a100 defaults
PHASES = ["", "registering", "profiling", "planning", "running", "done", "failed"]


def stage_model(pp, stages):
    torch.manual_seed(1000 + pp)  # same weights on every data-parallel replica of a stage
    layers = []
    if pp == 0:
        layers.append(nn.Embedding(VOCAB, D_MODEL))
    layers.append(nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=64,
                                             batch_first=True, dropout=0.0))
    if pp == stages - 1:
        layers.append(nn.Linear(D_MODEL, VOCAB))
    return nn.Sequential(*layers)


def http(method, url, token, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


class Rank:
    def __init__(self, args, rank):
        self.a, self.rank = args, rank
        self.stages, self.dp_n = args.stages, args.dp
        self.dp, self.pp = divmod(rank, args.stages)
        self.last = self.pp == self.stages - 1
        self.model = stage_model(self.pp, self.stages)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.gpu = perseus.Gpu("sim:a100")
        self.slow = 1.0
        self.dp_groups = [dist.new_group([p + d * self.stages for d in range(self.dp_n)])
                          for p in range(self.stages)]

    def work(self, kind):
        t, a = A100_WORK[kind]
        if self.last:
            t *= 1.07  # the last stage also runs the LM head (gpumodel.h)
        return t * self.slow, a

    def wait_until(self, t):
        self.gpu.sim_idle(t - self.gpu.now_s())

    def send(self, tensor, peer):
        ts = torch.tensor([self.gpu.now_s()], dtype=torch.float64)
        reqs = [dist.isend(tensor.contiguous(), peer), dist.isend(ts, peer)]
        return reqs

    def recv(self, peer):
        buf = torch.empty(BATCH, SEQ, D_MODEL)
        ts = torch.empty(1, dtype=torch.float64)
        for r in (dist.irecv(buf, peer), dist.irecv(ts, peer)):
            r.wait()
        self.wait_until(float(ts[0]))
        return buf

    def iteration(self, it):
        M, c = self.a.microbatches, self.client
        g = torch.Generator().manual_seed(it * 1000 + self.dp)
        tokens = [torch.randint(0, VOCAB, (BATCH, SEQ), generator=g) for _ in range(M)]
        targets = [torch.randint(0, VOCAB, (BATCH, SEQ), generator=g) for _ in range(M)]
        inputs, outputs, pending = {}, {}, []
        prev, nxt = self.rank - 1, self.rank + 1
        for kind, mb in perseus.one_f_one_b(self.stages, M, self.pp):
            if kind == "forward":
                x = tokens[mb] if self.pp == 0 else self.recv(prev).requires_grad_()
                with c.computation("forward", mb):
                    out = self.model(x)
                    if self.last:
                        out = nn.functional.cross_entropy(out.reshape(-1, VOCAB),
                                                          targets[mb].reshape(-1)) / M
                    self.gpu.sim_run(*self.work("forward"))
                inputs[mb], outputs[mb] = x, out
                if not self.last:
                    pending += self.send(out.detach(), nxt)
            else:
                grad = None if self.last else self.recv(nxt)
                with c.computation("backward", mb):
                    outputs[mb].backward(grad)
                    self.gpu.sim_run(*self.work("backward"))
                if self.pp > 0:
                    pending += self.send(inputs[mb].grad, prev)
                del inputs[mb], outputs[mb]
        for r in pending:
            r.wait()
        for p in self.model.parameters():  # data parallelism
            if p.grad is not None:
                dist.all_reduce(p.grad, group=self.dp_groups[self.pp])
                p.grad /= self.dp_n
        self.opt.step()
        self.opt.zero_grad()
        # The optimizer step waits for every pipeline: barrier on simulated time.
        t = torch.tensor([self.gpu.now_s()], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        self.wait_until(float(t[0]))
        c.iteration_end()


def worker(rank, args):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.master_port}",
                            rank=rank, world_size=args.stages * args.dp)
    torch.set_num_threads(1)
    r = Rank(args, rank)
    spec = {"model": "pipeline-gloo", "stages": args.stages, "microbatches": args.microbatches,
            "dp": args.dp, "clocks_mhz": list(range(1410, 1004, -45)),
            "blocking_power_w": 83.64, "reuse_frontier": False,
            "profiling": {"warmup_iterations": 1, "iterations_per_clock": 2}}
    ids = [None, None]
    kw = dict(rank=rank, dp=r.dp, pp=r.pp, gpu=r.gpu, poll_interval_s=0.02, warmup_iterations=0)
    if rank == 0:
        r.client = perseus.Client(args.server, job_spec=spec, **kw)
        ids = [r.client.job_id, r.client.token]
    dist.broadcast_object_list(ids, src=0)
    if rank != 0:
        r.client = perseus.Client(args.server, job_id=ids[0], token=ids[1], **kw)
    job_url = f"{args.server}/v1/jobs/{ids[0]}"

    world = args.stages * args.dp
    results = {"phases": [], "allmax": None, "running": None, "straggler": None,
               "recovery": None}
    stage, stage_round, count, it = "run", None, 0, 0
    run_plan = None  # the plan every pipeline ran before the straggler (the fastest)
    t_start = time.monotonic()
    while True:
        st = r.client.stats()
        mine = torch.tensor([PHASES.index(st["phase"]) if st["phase"] in PHASES else 0,
                             st["round"], st["plan_id"]], dtype=torch.int64)
        every = [torch.zeros(3, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(every, mine)
        uniform = all(bool((e[:2] == every[0][:2]).all()) for e in every)
        phase, rnd = PHASES[int(every[0][0])], int(every[0][1])
        # A new round can come before the plan it announces holds (a change held back behind a
        # pending switch bumps the round too): the stages below also wait for the plans in
        # effect, which each rank's schedule shows once its switch iteration came.
        plans = [int(e[2]) for e in every]
        if stage == "run" and uniform and phase == "running":
            run_plan = plans[0]
        others_moved = all(p != run_plan for p in plans[:args.stages * (args.dp - 1)])
        all_back = all(p == run_plan for p in plans)
        # Rank 0 steers: [stop, straggler factor of the last pipeline].
        cmd = torch.zeros(2, dtype=torch.float64)
        if rank == 0:
            if phase not in results["phases"]:
                results["phases"].append(phase)
            timeout = time.monotonic() - t_start > args.timeout
            if stage == "run" and uniform and phase == "running":
                count += 1
                if count >= 3:
                    http("POST", f"{job_url}/stragglers", ids[1],
                         {"dp": args.dp - 1, "slowdown": args.straggler})
                    stage, stage_round, count = "straggler", rnd, 0
            elif (stage == "straggler" and uniform and phase == "running" and rnd > stage_round
                  and others_moved):
                count += 1
                if count >= 2:
                    http("DELETE", f"{job_url}/stragglers/{args.dp - 1}", ids[1])
                    stage, stage_round, count = "recovery", rnd, 0
            elif (stage == "recovery" and uniform and phase == "running" and rnd > stage_round
                  and all_back):
                count += 1
                if count >= 2:
                    stage = "stop"
            cmd[0] = 1.0 if stage == "stop" or timeout else 0.0
            cmd[1] = args.straggler if stage == "straggler" else 1.0
        dist.broadcast(cmd, src=0)
        if cmd[0] > 0:
            break
        r.slow = float(cmd[1]) if r.dp == args.dp - 1 else 1.0
        t0, e0 = r.gpu.now_s(), r.gpu.energy_j()
        r.iteration(it)
        it += 1
        e = torch.tensor([r.gpu.energy_j() - e0], dtype=torch.float64)
        dist.all_reduce(e)
        if rank == 0 and uniform:
            rec = {"time_s": r.gpu.now_s() - t0, "energy_j": float(e[0]), "round": rnd,
                   "phase": phase}
            if phase == "profiling" and rnd == 0:
                results["allmax"] = rec
            if phase == "running" and stage == "run":
                results["running"] = rec
            if phase == "running" and stage == "straggler" and rnd > stage_round and others_moved:
                results["straggler"] = rec
            if (phase == "running" and stage in ("recovery", "stop") and rnd > stage_round
                    and all_back):
                results["recovery"] = rec
    if rank == 0:
        job = http("GET", job_url, ids[1])
        results["profile_source"] = job.get("profile_source")
        results["planning"] = job.get("planning")
        results["iterations"] = it
        results["wall_s"] = time.monotonic() - t_start
    r.client.close()
    reset = torch.tensor([1 if r.gpu.sim_clock() == 0 else 0], dtype=torch.int64)
    dist.all_reduce(reset)
    if rank == 0:
        results["clocks_reset"] = int(reset[0]) == world
        text = json.dumps(results, indent=1)
        print(text)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text)
    r.gpu.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--straggler", type=float, default=1.2)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--master-port", type=int, default=29517)
    ap.add_argument("--json")
    args = ap.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.stages * args.dp, join=True)


if __name__ == "__main__":
    main()
