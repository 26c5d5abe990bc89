"""Hooks for PyTorch's own pipeline executor (torch.distributed.pipelining): a user adds two lines.

    schedule = Schedule1F1B(stage, n_microbatches, loss_fn=loss_fn)    # as before
    client = perseus.Client(url, job_id=ID, token=TOKEN, rank=r, dp=d, pp=stage.stage_index)
    perseus.pipelining.attach(schedule, client)                         # the second line
    for batch in data:
        schedule.step(x, target=y)
        optimizer.step()

attach wraps the forward_one_chunk and backward_one_chunk methods of the schedule's stages (a
GPipe or 1F1B schedule's one stage, an interleaved schedule's several, in stage-index order: the
GPU's model chunks 0, 1, ...) in client.computation(kind, microbatch, chunk), so every
computation the schedule runs is bracketed in the order the schedule runs it. The job's schedule
(job spec "schedule": "gpipe", "1f1b" or "interleaved" with "virtual_stages") must be the one
the executor runs: the client checks the order and a computation out of it raises PerseusError
(-31). An iteration ends when the next schedule.step begins (the last step's is not reported),
so work between two steps (the optimizer) is in the iteration's tail: bracket it with `with client.other():`, or
create the client with other_after_last=True, so that it is never counted as blocking.

The methods wrapped are the executor's per-microbatch calls (PyTorch 2.4 to 2.6); attach fails
with PerseusError naming what is missing when a schedule lacks them."""

import functools

from . import ErrorCode, PerseusError

_METHODS = ("forward_one_chunk", "backward_one_chunk")


def _stages_of(schedule):
    stages = getattr(schedule, "_stages", None)
    if stages is None and getattr(schedule, "_stage", None) is not None:
        stages = [schedule._stage]
    if not stages:
        raise PerseusError(ErrorCode.EINVAL, f"{type(schedule).__name__}: no pipeline stage "
                                             "found (a torch.distributed.pipelining schedule "
                                             "has _stage or _stages)")
    for st in stages:
        missing = [m for m in _METHODS + ("stage_index",) if not hasattr(st, m)]
        if missing:
            raise PerseusError(ErrorCode.EINVAL, f"{type(st).__name__} lacks {', '.join(missing)}"
                                                 ": not a torch.distributed.pipelining stage "
                                                 "this adapter knows")
    return sorted(stages, key=lambda st: st.stage_index)


def _microbatch(args, kwargs, name):
    return kwargs[name] if name in kwargs else args[0]


def _wrap(stage, client, chunk):
    for method, kind, name in (("forward_one_chunk", "forward", "fwd_chunk_id"),
                               ("backward_one_chunk", "backward", "bwd_chunk_id")):
        inner = getattr(stage, method)

        @functools.wraps(inner)
        def hooked(*args, _inner=inner, _kind=kind, _name=name, **kwargs):
            with client.computation(_kind, _microbatch(args, kwargs, _name), chunk):
                return _inner(*args, **kwargs)

        setattr(stage, method, hooked)


def attach(schedule, client):
    """Install client's hooks on schedule (see the module's text); returns schedule. Call once,
    after creating both, on the training thread."""
    if getattr(schedule, "_perseus_client", None) is not None:
        raise PerseusError(ErrorCode.EINVAL, "this schedule already has a Perseus client")
    for chunk, stage in enumerate(_stages_of(schedule)):
        _wrap(stage, client, chunk)
    step = schedule.step
    started = [False]

    @functools.wraps(step)
    def step_hooked(*args, **kwargs):
        if started[0]:
            client.iteration_end()  # the previous step and the work after it
        started[0] = True
        return step(*args, **kwargs)

    schedule.step = step_hooked
    schedule._perseus_client = client
    return schedule
