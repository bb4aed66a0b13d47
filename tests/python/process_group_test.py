"""The kolo backend's ProcessGroup beyond the collectives (distributed_test.py has those):
point-to-point that Gloo runs and kolo's blocking send and recv would not (every rank
sending before it receives, batch_isend_irecv, receives from any source), get_future on
every kind of Work, sparse allreduce (Gloo's), and the calls without optional arguments
that torch's Python layer or a DDP communication hook make. Under kolorun, 2 or more ranks."""
import os
import sys

import torch
import torch.distributed as dist

import kolo.torch.distributed
from kolo_checks import expect, finish, section

me, n = int(os.environ["KOLO_RANK"]), int(os.environ["KOLO_SIZE"])
kolo.torch.distributed.init_process_group("kolo")
pg = dist.distributed_c10d._get_default_group()
nxt, prv = (me + 1) % n, (me - 1) % n


@section
def isend_before_irecv():
    # Every rank sends to the next and the previous before it receives: blocking sends
    # would each wait for a receive that is posted only after them (4 MiB: more than kolo
    # sends ahead of its receive).
    big = 1 << 20
    outs = [torch.zeros(big), torch.zeros(3, dtype=torch.int16)]
    works = [dist.isend(torch.full((big,), float(me)), nxt), dist.isend(torch.full((3,), me, dtype=torch.int16), prv),
             dist.irecv(outs[0], prv), dist.irecv(outs[1], nxt)]
    for w in works:
        w.wait()
        expect(w.is_completed() and w.is_success(), "isend/irecv: a waited Work is not complete and successful")
    expect(torch.equal(outs[0], torch.full((big,), float(prv))) and
           torch.equal(outs[1], torch.full((3,), nxt, dtype=torch.int16)), f"isend before irecv: {outs}")


@section
def batch_isend_irecv():
    strided = torch.zeros(4, 2)  # a column: a strided receive
    flags = torch.tensor([False, False])
    ops = [dist.P2POp(dist.irecv, strided[:, 1], prv), dist.P2POp(dist.isend, torch.arange(4.0) + me, nxt),
           dist.P2POp(dist.isend, torch.tensor([me % 2 == 0, True]), prv),
           dist.P2POp(dist.irecv, flags, nxt)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    expect(torch.equal(strided[:, 1], torch.arange(4.0) + prv) and not strided[:, 0].any(),
           f"batch_isend_irecv into a strided tensor: {strided}")
    expect(flags.tolist() == [nxt % 2 == 0, True], f"batch_isend_irecv of bools: {flags}")


@section
def recv_from_any_source():
    # Rank 0 takes two messages from each other rank, in whatever order they come (recv
    # with src=None returns the sender, irecv's Work tells it); the others send two. Then
    # (after a barrier: a receive from any source could take it) rank 1 sends a third, which
    # rank 0 receives by name: the counts of messages taken stay right.
    if me == 0:
        seen = []
        for i in range(2 * (n - 1)):
            got = torch.zeros(2, dtype=torch.int64)
            if i % 2:
                w = dist.irecv(got)
                w.wait()
                sender = w._source_rank()
            else:
                sender = dist.recv(got)
            expect(torch.equal(got, torch.full((2,), sender * 10)), f"recv from any source: {got} from {sender}")
            seen.append(sender)
        expect(sorted(seen) == sorted(list(range(1, n)) * 2), f"senders of recv from any source: {seen}")
        dist.barrier()
        last = torch.zeros(2, dtype=torch.int64)
        dist.recv(last, src=1)
        expect(torch.equal(last, torch.full((2,), -1)), f"recv from rank 1 after any source: {last}")
    else:
        for _ in range(2):
            dist.send(torch.full((2,), me * 10), 0)
        dist.barrier()
        if me == 1:
            dist.send(torch.full((2,), -1), 0)
    dist.barrier()


@section
def futures_of_every_work():
    t = torch.ones(3)
    got = dist.all_reduce(t, async_op=True).get_future().wait()
    expect(torch.equal(got[0], torch.full((3,), float(n))), f"all_reduce's future: {got}")
    strided = torch.ones(4, 2)[:, 0]  # not contiguous: the synchronous path
    got = pg.allreduce([strided]).get_future().then(lambda f: [x * 2 for x in f.value()]).wait()
    expect(torch.equal(got[0], torch.full((4,), 2.0 * n)), f"allreduce's future, chained: {got}")
    b = torch.full((2,), float(me))
    expect(torch.equal(dist.broadcast(b, 0, async_op=True).get_future().wait()[0], torch.zeros(2)), "broadcast's future")
    outs = [torch.zeros(1) for _ in range(n)]
    dist.all_gather(outs, torch.full((1,), float(me)), async_op=True).get_future().wait()
    expect(torch.equal(torch.cat(outs), torch.arange(float(n))), f"all_gather's future: {outs}")
    dist.barrier(async_op=True).get_future().wait()
    got = torch.zeros(1)
    send, recv = dist.isend(torch.full((1,), float(me)), nxt), dist.irecv(got, prv)
    expect(torch.equal(recv.get_future().wait()[0], torch.full((1,), float(prv))) and send.get_future().done(),
           f"isend/irecv futures: {got}")


@section
def sparse_allreduce():
    # Rank r holds r + 1 entries of a 4 x 3 x 2 tensor (two sparse dimensions, one dense),
    # some of them where other ranks have theirs; rank 0 also an uncoalesced duplicate.
    def held(r):
        idx = torch.tensor([[(r + k) % 4 for k in range(r + 1)], [k % 3 for k in range(r + 1)]])
        vals = torch.stack([torch.tensor([float(r + 1), float(k)]) for k in range(r + 1)])
        if r == 0:
            idx, vals = torch.cat([idx, idx], 1), torch.cat([vals, vals])
        return torch.sparse_coo_tensor(idx, vals, (4, 3, 2))
    t = held(me)
    dist.all_reduce(t)
    want = sum(held(r).to_dense() for r in range(n))
    expect(t.is_sparse and torch.equal(t.to_dense(), want), f"sparse all_reduce: {t.to_dense()} != {want}")
    try:
        dist.all_reduce(held(me), op=dist.ReduceOp.MAX)
        expect(False, "sparse all_reduce with MAX did not raise")
    except ValueError:
        pass
    # An empty one on some ranks.
    e = torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(0), (5,)) if me else \
        torch.sparse_coo_tensor(torch.tensor([[2]]), torch.tensor([7.0]), (5,))
    dist.all_reduce(e)
    expect(torch.equal(e.to_dense(), torch.tensor([0.0, 0, 7, 0, 0])), f"sparse all_reduce, empty on ranks: {e}")


@section
def calls_without_options():
    # As a DDP communication hook or a script calls the group itself: no opts, no tag.
    t = torch.full((2,), float(me))
    pg.allreduce([t]).wait()
    outs = [[torch.zeros(2) for _ in range(n)]]
    pg.allgather(outs, [t]).wait()
    expect(all(torch.equal(o, torch.full((2,), float(sum(range(n))))) for o in outs[0]), f"allgather: {outs}")
    pg.barrier().wait()
    if me < 2 and n > 1:
        other = torch.zeros(1)
        (pg.send([torch.ones(1)], 1 - me) if me == 0 else pg.recv([other], 1 - me)).wait()
        expect(me == 0 or torch.equal(other, torch.ones(1)), f"send/recv without a tag: {other}")
    pg.barrier().wait()


@section
def ddp_comm_hook():
    # A hook that averages through process_group.allreduce(tensors).get_future(), as
    # torch's default hooks do; training must match one process on the whole batch.
    def hook(group, bucket):
        return group.allreduce([bucket.buffer()]).get_future().then(lambda f: f.value()[0] / n)

    def make():
        torch.manual_seed(5)
        return torch.nn.Linear(3, 2).double()
    reference, model = make(), make()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(pg, hook)
    torch.manual_seed(6)
    x, y = torch.randn(2 * n, 3, dtype=torch.float64), torch.randn(2 * n, 2, dtype=torch.float64)
    torch.nn.functional.mse_loss(ddp(x.chunk(n)[me]), y.chunk(n)[me]).backward()
    torch.nn.functional.mse_loss(reference(x), y).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        expect(torch.allclose(p.grad, q.grad, atol=1e-12), f"DDP with a comm hook: {p.grad} != {q.grad}")


@section
def group_timeout():
    # A group's own timeout bounds its waits: rank 0 alone enters a barrier of a group made
    # with a 1 s timeout and gets torch's words for it after about 1 s, not KOLO_TIMEOUT.
    import datetime
    import time
    g = dist.new_group(timeout=datetime.timedelta(seconds=1))
    if me == 0:
        start = time.monotonic()
        try:
            dist.barrier(group=g)
            expect(False, "a barrier that rank 0 alone entered completed")
        except RuntimeError as e:
            took = time.monotonic() - start
            expect(" Timed out " in str(e), f"the group's timeout: not torch's words: {e}")
            expect(0.9 < took < 5, f"the group's 1 s timeout took {took:.2f} s")
    dist.barrier()


@section
def flight_recorder_dump():
    # The group's own recorder, and every communicator of the process through kolo.torch:
    # one readable dump per communicator and rank, holding this test's collectives.
    import glob
    import json
    import shutil
    import kolo.torch
    folder = "/tmp/kolo-pg-trace-" + os.environ["KOLO_ADDR"].replace(":", "_").replace("/", "_")
    for sub, dump in (("group", pg.dump_trace), ("all", kolo.torch.dump_trace)):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
        dump(os.path.join(folder, sub))
        files = glob.glob(os.path.join(folder, sub, f"kolo-trace.*.rank{me}.json"))
        expect(len(files) >= 1, f"dump_trace ({sub}) wrote no file of rank {me}")
        for f in files:
            with open(f) as text:
                d = json.load(text)
            expect(d["format"] == "kolo-flight-recorder" and d["rank"] == me and d["size"] == n,
                   f"{f}: not this rank's dump: {d.get('format')} {d.get('rank')} {d.get('size')}")
        kinds = {c["kind"] for f in files for c in json.load(open(f))["calls"]}
        expect("allreduce" in kinds, f"dump_trace ({sub}): no allreduce recorded: {kinds}")
    dist.barrier()
    if me == 0:
        shutil.rmtree(folder, ignore_errors=True)


dist.barrier()
finish(f"rank {me}: kolo backend's process group")
