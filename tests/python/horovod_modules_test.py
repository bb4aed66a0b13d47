"""Horovod's module layout and variables on kolo.torch, under kolorun: the modules scripts
import from (horovod.torch.mpi_ops, .optimizer, .functions, horovod.common.exceptions) have
kolo counterparts holding the same objects; HOROVOD_* variables set before hvd.init() reach
kolo's runtime (HOROVOD_TIMELINE writes rank 0's timeline there), a KOLO_* one set too wins
with a warning."""
import json
import os
import sys
import tempfile
import warnings

import torch

from kolo_checks import expect, finish, section

rank_env = int(os.environ.get("KOLO_RANK", "0"))
# One folder for the job: kolorun's job address is the same on every rank.
folder = os.path.join(tempfile.gettempdir(), "kolo-hvd-modules-" + os.environ.get("KOLO_ADDR", "x").replace(":", "_"))
os.makedirs(folder, exist_ok=True)
timeline = os.path.join(folder, "timeline.json")
os.environ["HOROVOD_TIMELINE"] = timeline
os.environ["HOROVOD_FUSION_THRESHOLD"] = str(8 << 20)
os.environ["HOROVOD_CYCLE_TIME"] = "2.5"
os.environ["HOROVOD_CACHE_CAPACITY"] = "0"
os.environ["HOROVOD_AUTOTUNE"] = "false"
os.environ["KOLO_STALL_CHECK_TIME"] = "30"
os.environ["HOROVOD_STALL_CHECK_TIME_SECONDS"] = "45"  # disagrees: KOLO_* wins, with a warning

import kolo.torch as hvd  # noqa: E402

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    hvd.init()
n, me = hvd.size(), hvd.rank()


@section
def modules():
    from kolo.torch import functions, mpi_ops, optimizer
    from kolo.common import exceptions
    expect(mpi_ops.synchronize is hvd.synchronize and mpi_ops.allreduce_async_ is hvd.allreduce_async_,
           "mpi_ops holds hvd's operations")
    expect(mpi_ops.size() == n and mpi_ops.rank() == me, "mpi_ops.size/rank")
    expect(optimizer.DistributedOptimizer is hvd.DistributedOptimizer, "optimizer.DistributedOptimizer")
    expect(functions.broadcast_parameters is hvd.broadcast_parameters, "functions.broadcast_parameters")
    expect(exceptions.HorovodInternalError is hvd.HorovodInternalError, "common.exceptions.HorovodInternalError")
    expect(issubclass(exceptions.HostsUpdatedInterrupt, BaseException), "common.exceptions.HostsUpdatedInterrupt")


@section
def variables():
    expect(os.environ.get("KOLO_TIMELINE") == timeline, f"KOLO_TIMELINE {os.environ.get('KOLO_TIMELINE')}")
    expect(os.environ.get("KOLO_FUSION_THRESHOLD") == str(8 << 20), "KOLO_FUSION_THRESHOLD from HOROVOD_'s")
    expect(os.environ.get("KOLO_CYCLE_TIME") == "2.5", "KOLO_CYCLE_TIME from HOROVOD_CYCLE_TIME")
    expect(os.environ.get("KOLO_CACHE_CAPACITY") == "0", "KOLO_CACHE_CAPACITY")
    expect(os.environ.get("KOLO_AUTOTUNE") == "0", "HOROVOD_AUTOTUNE=false is KOLO_AUTOTUNE=0")
    expect(os.environ.get("KOLO_STALL_CHECK_TIME") == "30", "KOLO_STALL_CHECK_TIME set too wins")
    said = [str(w.message) for w in caught]
    expect(any("HOROVOD_STALL_CHECK_TIME_SECONDS=45 and KOLO_STALL_CHECK_TIME=30 disagree" in s for s in said),
           f"the conflict is a warning: {said}")
    # The mapping alone, on a dictionary.
    env = {"HOROVOD_STALL_CHECK_DISABLE": "1", "HOROVOD_TIMELINE_MARK_CYCLES": "1"}
    notes = hvd._horovod_environment(env)
    expect(env.get("KOLO_STALL_CHECK_TIME") == "0", f"HOROVOD_STALL_CHECK_DISABLE: {env}")
    expect(any("MARK_CYCLES" in s for s in notes), f"mark cycles noted: {notes}")
    # HOROVOD_TIMELINE=DYNAMIC (Horovod's own suite sets it): no file until start_timeline().
    env = {"HOROVOD_TIMELINE": "DYNAMIC"}
    hvd._horovod_environment(env)
    expect("KOLO_TIMELINE" not in env, f"HOROVOD_TIMELINE=DYNAMIC is not a file's name: {env}")


@section
def operations_run():
    for i in range(3):
        t = hvd.allreduce(torch.full((4,), float(me + i)), op=hvd.Sum, name=f"hvdmod.{i}")
        expect(torch.equal(t, torch.full((4,), float(sum(range(n)) + n * i))), f"allreduce {i}: {t.tolist()}")


hvd.shutdown()


@section
def timeline_written():
    if me != 0:
        return
    expect(os.path.exists(timeline), f"HOROVOD_TIMELINE: no file at {timeline}")
    with open(timeline) as f:
        text = f.read()
    trace = json.loads(text)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    rows = {e["args"].get("name") for e in events if e.get("name") == "thread_name"}
    expect({"hvdmod.0", "hvdmod.1", "hvdmod.2"} <= rows, f"the timeline has a row per operation: {sorted(rows)}")
    names = {e.get("name") for e in events}
    for horovods in ("NEGOTIATE_ALLREDUCE", "ALLREDUCE", "QUEUE", "CYCLE_START"):  # Horovod's vocabulary
        expect(horovods in names, f"the timeline has {horovods} events: {sorted(names)}")


finish(f"horovod_modules rank {me} of {n}")
