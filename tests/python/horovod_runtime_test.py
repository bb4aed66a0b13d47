"""kolo.torch where Horovod's own suite found it wanting (tools/horovod-suite.sh), under
kolorun (2 and 3 ranks): the runtime (a rank's first operation asynchronous while a peer
is in barrier(); a name already in flight refused at once with a ValueError; tensors of
one element count in different shapes refused on every rank; join: any operation but
allreduce fails at once while a rank has joined, whatever names the others use, cached
names too, and Average divides by every rank) and DistributedOptimizer
(broadcast_optimizer_state before any step, no named_parameters, a process set leaving
ranks out, sparse gradients, step() after synchronize()), a name refused when enqueued twice in a row even if the
first completed in between, and shutdown() and init() numbering unnamed operations afresh. Each is checked against what it
must give, computed here from every rank's known inputs. Exits non-zero with the failures
listed."""
import sys
import time
import warnings

import torch

import kolo.torch as hvd
from kolo import _capi
from kolo.torch import _requests as hvd_requests

from kolo_checks import expect, finish, run_only, section

run_only(sys.argv[1:])  # part names to run (default: all)


hvd.init()
n, me = hvd.size(), hvd.rank()
if n < 2:
    print("horovod_runtime_test: needs 2 ranks or more")
    sys.exit(1)

# ---- the first operation after init asynchronous on rank 0 while the others are in
# barrier(); a second one of the same name refused at once, with a ValueError ------------
@section
def first_async_beside_barrier():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3) + me
    start = time.monotonic()
    handle = None
    if me == 0:
        handle = hvd.allreduce_async(x, name="dup", op=hvd.Sum)
        try:
            hvd.allreduce_async(x, name="dup", op=hvd.Sum)
            expect(False, "rank 0: a second 'dup' in flight was accepted")
        except ValueError:
            pass
    hvd.barrier()
    # The others' check, on a name rank 0 enqueues only after the second barrier: still in
    # flight when enqueued again.
    second = None
    if me != 0:
        second = hvd.allreduce_async(x, name="dup2", op=hvd.Sum)
        try:
            hvd.allreduce_async(x, name="dup2", op=hvd.Sum)
            expect(False, f"rank {me}: a second 'dup2' in flight was accepted")
        except ValueError:
            pass
        handle = hvd.allreduce_async(x, name="dup", op=hvd.Sum)
    hvd.barrier()
    if me == 0:
        second = hvd.allreduce_async(x, name="dup2", op=hvd.Sum)
    expect(torch.equal(hvd.synchronize(second), sum(torch.arange(6, dtype=torch.float32).reshape(2, 3) + r
                                                    for r in range(n))), "the first 'dup2' allreduce")
    out = hvd.synchronize(handle)
    want = sum(torch.arange(6, dtype=torch.float32).reshape(2, 3) + r for r in range(n))
    expect(torch.equal(out, want), f"the first 'dup' allreduce: {out.tolist()} != {want.tolist()}")
    hvd.barrier()
    elapsed = time.monotonic() - start
    expect(elapsed < 10, f"async first operation beside barrier() took {elapsed:.1f} s (a wait for KOLO_TIMEOUT)")


# The same with a process set's runtime (its ranks: all but the last).
@section
def process_set_first_async_beside_barrier():
    members = list(range(n - 1)) if n > 2 else [0, 1]
    ps = hvd.add_process_set(members)
    if ps.included():
        h = None
        if ps.rank() == 0:
            h = hvd.allreduce_async(torch.ones(3), name="ps.first", op=hvd.Sum, process_set=ps)
        hvd.barrier(process_set=ps)
        if ps.rank() != 0:
            h = hvd.allreduce_async(torch.ones(3), name="ps.first", op=hvd.Sum, process_set=ps)
        got = hvd.synchronize(h)
        expect(torch.equal(got, torch.full((3,), float(len(members)))), f"process set's first allreduce: {got}")
    hvd.barrier()
    hvd.remove_process_set(ps)


# ---- shapes: the same element count in different shapes is a mismatch -----------------
@section
def shape_mismatch():
    shape = (4, 6) if me == 0 else (6, 4)
    try:
        hvd.allreduce(torch.ones(shape), name="shape.mismatch", op=hvd.Sum)
        expect(False, f"rank {me}: allreduce of shape {shape} against another rank's {(4, 6)} did not raise")
    except RuntimeError as e:
        expect("shape" in str(e), f"rank {me}: the shape mismatch's message does not name the shape: {e}")
    # Rows of different shapes (same rows count) in an alltoall, and an allgather.
    rows = torch.ones(2 * n, 3 * (me + 1), 2)
    try:
        hvd.alltoall(rows, name="shape.alltoall")
        expect(False, f"rank {me}: alltoall of rows {tuple(rows.shape[1:])} unlike the other ranks' did not raise")
    except RuntimeError:
        pass
    rows = torch.ones(2, 6, 1) if me == 0 else torch.ones(2, 3, 2)
    try:
        hvd.allgather(rows, name="shape.allgather")
        expect(False, f"rank {me}: allgather of rows {tuple(rows.shape[1:])} unlike the other ranks' did not raise")
    except RuntimeError:
        pass
    # The runtime goes on; the same shapes everywhere still reduce.
    got = hvd.allreduce(torch.ones(4, 6), name="shape.same", op=hvd.Sum)
    expect(torch.equal(got, torch.full((4, 6), float(n))), "allreduce after the shape mismatches")


# ---- join ------------------------------------------------------------------------------
# While a rank has joined only allreduce can run (the joined rank gives zeros): any other
# operation raises at once on the ranks that make it, whatever the others submit. In
# Horovod's own join tests the ranks that did not join first name their unnamed allgathers
# differently (counters that the joining rank did not advance), so waiting for the others
# to submit the same name hung from 3 ranks on. Then join() returns the same last rank on
# every rank.
def raises_at_once(what, fn):
    start = time.monotonic()
    try:
        fn()
        expect(False, f"rank {me}: {what} while a rank has joined did not raise")
    except RuntimeError as e:  # as Horovod's (its tests catch RuntimeError)
        expect("joined" in str(e), f"rank {me}: {what}: the error does not say a rank has joined: {e}")
    elapsed = time.monotonic() - start
    expect(elapsed < 20, f"rank {me}: {what} took {elapsed:.1f} s to fail (waited for KOLO_TIMEOUT?)")


def joined_round(first, ops):
    """Rank `first` joins; the others make `ops` (each must raise), then join."""
    if me != first:
        for what, fn in ops:
            raises_at_once(what, fn)
    last = hvd.join()
    everyone = hvd.allgather_object(last, name=f"join.last.{first}")
    expect(everyone == [everyone[0]] * n, f"join() returned {everyone} on the ranks")
    expect(last != first, f"rank {me}: join() returned {last}, the rank that joined first")


@section
def join_with_other_operations():
    x = torch.ones(2 * n, 3)
    for first in range(n):
        ops = [("allgather (a name of this rank's own)", lambda: hvd.allgather(x, name=f"join.ag.{first}.{me}")),
               ("unnamed allgather", lambda: hvd.allgather(x)),
               ("broadcast", lambda: hvd.broadcast(x, root_rank=(first + 1) % n, name=f"join.bc.{first}.{me}")),
               ("reducescatter", lambda: hvd.reducescatter(x, op=hvd.Sum, name=f"join.rs.{first}.{me}")),
               ("alltoall", lambda: hvd.alltoall(x, name=f"join.a2a.{first}.{me}"))]
        joined_round(first, ops)
    # The runtime goes on: every rank's allreduce again.
    got = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="join.after")
    expect(torch.equal(got, torch.full((3,), float(n))), f"allreduce after the joins: {got}")


# The same with names the response cache already holds (broadcast and reducescatter are
# cached once run): all the others with one name (answered from the cache), then each rank
# with a name of its own (in the cache too, so no rank sends it to the coordinator unless
# it sees that a rank has joined).
@section
def join_with_cached_operations():
    x = torch.arange(2 * n * 3, dtype=torch.float32).reshape(2 * n, 3)
    names = ["join.cached.all"] + [f"join.cached.{r}" for r in range(n)]
    for _ in range(2):
        for name in names:
            expect(torch.equal(hvd.broadcast(x + me, root_rank=0, name=name + ".bc"), x),
                   f"cached broadcast {name} before the joins")
            got = hvd.reducescatter(x, op=hvd.Sum, name=name + ".rs")
            expect(torch.equal(got, (x * n)[2 * me:2 * me + 2]), f"cached reducescatter {name}")
    for first in range(n):
        joined_round(first, [("cached broadcast", lambda: hvd.broadcast(x, root_rank=first, name="join.cached.all.bc")),
                             ("cached reducescatter", lambda: hvd.reducescatter(x, op=hvd.Sum,
                                                                                 name="join.cached.all.rs"))])
        joined_round(first, [("cached broadcast of this rank's own",
                              lambda: hvd.broadcast(x, root_rank=first, name=f"join.cached.{me}.bc")),
                             ("cached reducescatter of this rank's own",
                              lambda: hvd.reducescatter(x, op=hvd.Sum, name=f"join.cached.{me}.rs"))])
    expect(torch.equal(hvd.broadcast(x + me, root_rank=n - 1, name="join.cached.all.bc"), x + n - 1),
           "cached broadcast after the joins")


# Allreduce with joined ranks: their zeros in the sum, and Average divides by every rank
# (joined ones too) as Horovod does: the sum times 1/size rounded to the dtype (float32:
# float32(1/size); integers: the product in float64, truncated).
@section
def join_allreduce_average():
    torch.manual_seed(1234)
    xs = {dt: torch.FloatTensor(17).random_(-100, 100).to(dt) for dt in (torch.int32, torch.float32, torch.float64)}
    for first in range(n):
        handles = {}
        if me != first:
            handles = {dt: hvd.allreduce_async(x, name=f"join.avg.{dt}", op=hvd.Average) for dt, x in xs.items()}
        hvd.join()
        for dt, h in handles.items():
            got = hvd.synchronize(h)
            s = xs[dt] * (n - 1)
            if dt.is_floating_point:
                want = s * torch.tensor(1 / n, dtype=torch.float64).to(dt)
            else:
                want = (s.double() * (1 / n)).to(dt)
            expect(torch.equal(got, want), f"rank {me}: join, Average of {dt}: {got.tolist()} != {want.tolist()}")
            if n == 3 and dt == torch.float32:  # the data tells the product from a division
                expect(not torch.equal(want, s / n), "join_allreduce_average: float32(1/3) products equal divisions")


# ---- DistributedOptimizer -------------------------------------------------------------
def model_and_data(seed):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    torch.manual_seed(seed)
    return model, torch.randn(8, 5), torch.randn(8, 2)


def grads_of(seed):
    """Every parameter's gradient of rank `seed`'s batch, from the common initial model."""
    model, x, y = model_and_data(seed)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


# broadcast_optimizer_state before any step: trainable parameters get zero gradients and
# the state (momentum buffers) exists on every rank, as root's; frozen ones keep None.
@section
def broadcast_state_before_step():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    model[0].bias.requires_grad_(False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    expect(model[0].bias.grad is None, "broadcast_optimizer_state gave a frozen parameter a gradient")
    expect(all(p.grad is not None and torch.count_nonzero(p.grad) == 0 for p in model.parameters()
               if p.requires_grad), "broadcast_optimizer_state: trainable parameters without zero gradients")
    state = opt.state_dict()["state"]
    expect(len(state) == 3 and all("momentum_buffer" in s for s in state.values()),
           f"broadcast_optimizer_state: state of {len(state)} parameters, not the 3 trainable ones")


# No named_parameters: names unique, the same on every rank (Horovod's _parameter_names,
# which its own tests and some scripts read).
@section
def unnamed_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([{"params": model[0].parameters()},
                                                    {"params": model[1].parameters()}], lr=0.1))
    names = opt._parameter_names
    expect(len(names) == 4 and len(set(names.values())) == 4, f"unnamed parameters' names: {names}")
    everyone = hvd.allgather_object(sorted(names.values()), name="unnamed.names")
    expect(all(e == everyone[0] for e in everyone), f"unnamed parameters' names differ across ranks: {everyone}")


# A process set of the even ranks: its members step with the gradients averaged among
# them, the others with their own gradients (they take no part).
@section
def optimizer_process_set():
    members = list(range(0, n, 2))
    ps = hvd.add_process_set(members)
    model, x, y = model_and_data(me)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(), process_set=ps)
    before = [p.detach().clone() for p in model.parameters()]
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    try:
        opt.step()
    finally:
        hvd.barrier()
        hvd.remove_process_set(ps)
    if me in members:
        per_rank = [grads_of(r) for r in members]
        want_grads = [sum(g[i] for g in per_rank) / len(members) for i in range(len(before))]
    else:
        want_grads = grads_of(me)
    for i, (b, p, g) in enumerate(zip(before, model.parameters(), want_grads)):
        expect(torch.allclose(p.detach(), b - 0.5 * g, atol=1e-6),
               f"process set optimizer, rank {me} ({'in' if me in members else 'outside'}), parameter {i}")


def indices_of(rank):
    return torch.tensor([[1, 2, 4], [4, 3 + rank % 5, 9]])


# Sparse gradients (an embedding with sparse=True) without sparse_as_dense: every rank's
# entries, averaged, kept sparse (SparseAdam takes sparse gradients only); with
# sparse_as_dense, the same values, sparse again for the step.
def sparse_gradients(as_dense):
    torch.manual_seed(7)
    emb = torch.nn.Embedding(10, 3, sparse=True)
    torch.manual_seed(7)
    emb_ref = torch.nn.Embedding(10, 3, sparse=True)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(emb.parameters()), lr=0.1),
                                   sparse_as_dense=as_dense)
    opt.zero_grad()
    emb(indices_of(me)).pow(2).sum().backward()
    opt.synchronize()
    g = emb.weight.grad
    expect(g.is_sparse, f"sparse_as_dense={as_dense}: the gradient handed to the step is not sparse")
    want = torch.zeros(10, 3)
    for r in range(n):
        emb_ref.zero_grad()
        emb_ref(indices_of(r)).pow(2).sum().backward()
        want += emb_ref.weight.grad.to_dense()
    want /= n
    expect(torch.allclose(g.to_dense(), want, atol=1e-6), f"sparse_as_dense={as_dense}: averaged sparse gradient")
    with opt.skip_synchronize():
        opt.step()


@section
def sparse_gradients_allgathered():
    sparse_gradients(False)


@section
def sparse_gradients_as_dense():
    sparse_gradients(True)


# step() after synchronize() without skip_synchronize(): one warning, naming the remedy.
@section
def step_after_synchronize_warns():
    model, x, y = model_and_data(me)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    for skip in (True, False):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if skip:
                with opt.skip_synchronize():
                    opt.step()
            else:
                opt.step()
        mine = [w for w in caught if "skip_synchronize()" in str(w.message)]
        expect(len(mine) == (0 if skip else 1), f"step() after synchronize(), skip={skip}: {len(mine)} warnings")


# ---- a name is free again once its operation completes (Horovod's semantics), even while
# its handle is kept unsynchronized; synchronize() still returns that operation's output --
@section
def name_free_once_done():
    x = torch.full((3,), float(me + 1))
    first = hvd.allreduce_async(x, name="reused", op=hvd.Sum)
    deadline = time.monotonic() + 30
    while not hvd.poll(first) and time.monotonic() < deadline:
        time.sleep(0.001)
    expect(hvd.poll(first), "the first 'reused' allreduce completed")
    again = hvd.allreduce_async(torch.full((3,), 10.0 * (me + 1)), name="reused", op=hvd.Sum)
    want = n * (n + 1) / 2
    expect(torch.equal(hvd.synchronize(again), torch.full((3,), 10.0 * want)), "the second 'reused' allreduce")
    expect(torch.equal(hvd.synchronize(first), torch.full((3,), want)), "the first, synchronized after")


# ---- the same name enqueued twice in a row is refused even when the first has completed
# in between (its peers were waiting for it): Horovod's background thread cannot complete it
# that fast, and its suite's *_duplicate_name_error tests count on the error --------------
@section
def duplicate_name_after_peers_waited():
    x = torch.full((2,), float(me))
    first = None
    if me == 0:
        first = hvd.allreduce_async(x, name="raced", op=hvd.Sum)
    hvd.barrier()
    if me != 0:
        first = hvd.allreduce_async(x, name="raced", op=hvd.Sum)
        if me == n - 1:  # the last one in: the first completes at once
            deadline = time.monotonic() + 30
            while _capi.lib.kolo_test(hvd_requests._pending[first].request) == _capi.IN_PROGRESS and \
                    time.monotonic() < deadline:
                time.sleep(0.001)
            try:
                hvd.allreduce_async(x, name="raced", op=hvd.Sum)
                expect(False, "a name enqueued twice in a row, the first completed between: no error")
            except ValueError:
                pass
    expect(torch.equal(hvd.synchronize(first), torch.full((2,), float(sum(range(n))))), "the 'raced' allreduce")
    hvd.barrier()  # the others wait for the last rank's check before they go on


# ---- an unnamed operation one rank made and the others did not (a failure on some ranks,
# in a script) leaves that rank's numbering ahead: shutdown() and init() number from 0
# again on every rank, as Horovod's shutdown resets its handles ----------------------------
@section
def shutdown_renumbers_unnamed():
    if me == 1:
        hvd.allreduce_async(torch.ones(2), op=hvd.Sum)  # the others never make it; never synchronized
    hvd.barrier()  # none shuts down (which stops every rank's runtime) before rank 1 has enqueued it
    hvd.shutdown()
    hvd.init()
    t = hvd.allreduce(torch.full((2,), float(me)), op=hvd.Sum)
    expect(torch.equal(t, torch.full((2,), float(sum(range(n))))), f"an unnamed allreduce after re-init: {t}")


hvd.shutdown()
finish(f"horovod_runtime_test rank {me}/{n}")
