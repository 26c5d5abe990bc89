"""perseus.pipelining.attach on stand-ins for torch.distributed.pipelining's schedules (Debian's
PyTorch predates the module): stages with forward_one_chunk / backward_one_chunk and the
schedules' loops as PyTorch 2.4-2.6 write them (GPipe: every forward, then every backward;
1F1B: num_stages - stage_index forwards, then backward/forward pairs, then the remaining
backwards). Asserts: the hooks see each stage's computations in exactly perseus.order's order
for that schedule (what perseusd plans and the client checks), the microbatch ids passed by
position or keyword, an interleaved schedule's stages as the GPU's chunks 0, 1 in stage-index
order, one iteration_end per step after the first; a real perseus.Client (measure-only, sim GPU)
measures every computation; a schedule without stages is refused.

usage: pipelining_standin.py"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import perseus  # noqa: E402
import perseus.pipelining  # noqa: E402


class Stage:
    """A stand-in _PipelineStageBase: the per-microbatch calls a schedule makes."""

    def __init__(self, stage_index, num_stages, ran):
        self.stage_index, self.num_stages, self.ran = stage_index, num_stages, ran

    def forward_one_chunk(self, fwd_chunk_id, args=None, kwargs=None):
        self.ran.append(("F", self.stage_index, fwd_chunk_id))
        return args

    def backward_one_chunk(self, bwd_chunk_id, loss=None, full_backward=True):
        self.ran.append(("B", self.stage_index, bwd_chunk_id))


class ScheduleGPipe:
    def __init__(self, stage, n_microbatches):
        self._stage, self._n_microbatches = stage, n_microbatches

    def step(self, *args, **kwargs):
        for i in range(self._n_microbatches):
            self._stage.forward_one_chunk(i, args)
        for i in range(self._n_microbatches):
            self._stage.backward_one_chunk(i, loss=None)


class Schedule1F1B:
    def __init__(self, stage, n_microbatches):
        self._stage, self._n_microbatches = stage, n_microbatches

    def step(self, *args, **kwargs):
        n, st = self._n_microbatches, self._stage
        warmup = min(n, st.num_stages - st.stage_index)
        fwd = bwd = 0
        for _ in range(warmup):
            st.forward_one_chunk(fwd, args)
            fwd += 1
        while True:
            st.backward_one_chunk(bwd_chunk_id=bwd)  # by keyword, as some versions call it
            bwd += 1
            if fwd == n:
                break
            st.forward_one_chunk(fwd, args)
            fwd += 1
        while bwd < n:
            st.backward_one_chunk(bwd)
            bwd += 1


class ScheduleInterleaved:
    """Several stages per rank, run in the order given (wiring only: the order is not PyTorch's
    algorithm here)."""

    def __init__(self, stages, n_microbatches, order):
        self._stages, self._n_microbatches, self.order = stages, n_microbatches, order

    def step(self, *args, **kwargs):
        for kind, mb, chunk in self.order:
            st = sorted(self._stages, key=lambda s: s.stage_index)[chunk]
            (st.forward_one_chunk if kind == "forward" else st.backward_one_chunk)(mb)


class Recorder:
    """A duck-typed client recording the hooks."""

    def __init__(self):
        self.hooks, self.ends, self.open = [], 0, None

    def computation(self, kind, microbatch, chunk=0):
        rec = self

        class _Window:
            def __enter__(self):
                assert rec.open is None, "nested windows"
                rec.open = (kind, microbatch, chunk)
                rec.hooks.append(rec.open)

            def __exit__(self, *exc):
                rec.open = None

        return _Window()

    def iteration_end(self):
        self.ends += 1


def check_single(cls, name, stages, mb):
    for s in range(stages):
        ran, rec = [], Recorder()
        sched = perseus.pipelining.attach(cls(Stage(s, stages, ran), mb), rec)
        for _ in range(3):
            sched.step("x")
        want = perseus.order(name, stages, mb, s)
        assert rec.hooks == want * 3, (name, s, rec.hooks[:len(want)], want)
        assert rec.ends == 2, rec.ends
        assert [(k, m) for k, _, m in ran] == [("F" if k == "forward" else "B", m)
                                               for k, m, _ in want] * 3
    print(f"{name}: {stages} stages x {mb} microbatches, hooks in perseus.order's order")


def check_interleaved(stages, mb, v):
    for s in range(stages):
        order = perseus.order("interleaved", stages, mb, s, virtual_stages=v)
        rec = Recorder()
        st = [Stage(s + c * stages, stages * v, []) for c in reversed(range(v))]
        sched = perseus.pipelining.attach(ScheduleInterleaved(st, mb, order), rec)
        sched.step()
        assert rec.hooks == order, (s, rec.hooks, order)
    print(f"interleaved: {v} chunks per GPU mapped to chunks 0..{v - 1} by stage index")


def check_real_client():
    with perseus.Gpu("sim:a100") as g, perseus.Client(measure_only=True, gpu=g,
                                                      warmup_iterations=0,
                                                      other_after_last=True) as c:
        stage = Stage(1, 4, [])
        fwd, bwd = stage.forward_one_chunk, stage.backward_one_chunk

        def forward(i, *a, **k):  # the sim GPU computes while the window is open
            g.sim_run(0.004, 0.9)
            return fwd(i, *a, **k)

        def backward(i=None, **k):
            g.sim_run(0.008, 0.9)
            return bwd(i if i is not None else k.pop("bwd_chunk_id"), **k)

        stage.forward_one_chunk, stage.backward_one_chunk = forward, backward
        sched = perseus.pipelining.attach(Schedule1F1B(stage, 4), c)
        for _ in range(3):
            sched.step("x")
            g.sim_run(0.010, 0.5)  # the optimizer step, un-bracketed
        m = c.measured()
        assert m[("forward", 0)]["windows"] == 8 and m[("backward", 0)]["windows"] == 8, m
        try:
            perseus.pipelining.attach(sched, c)
            raise AssertionError("a second attach was accepted")
        except perseus.PerseusError as e:
            assert e.code == perseus.ErrorCode.EINVAL, e
    print("a real client: 2 steps ended, 8 forwards and 8 backwards measured")


def main():
    check_single(ScheduleGPipe, "gpipe", 4, 8)
    check_single(Schedule1F1B, "1f1b", 4, 8)
    check_single(Schedule1F1B, "1f1b", 4, 2)  # fewer microbatches than stages
    check_interleaved(4, 8, 2)
    check_real_client()
    try:
        perseus.pipelining.attach(object(), Recorder())
        raise AssertionError("a schedule without stages was accepted")
    except perseus.PerseusError as e:
        assert e.code == perseus.ErrorCode.EINVAL and "no pipeline stage" in str(e), e
    print("pipelining stand-in: ok")


if __name__ == "__main__":
    main()
