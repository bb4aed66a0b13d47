"""A worker of torchrun_test.sh, started by torchrun (torch.distributed.run) on the test
hosts: kolo's collectives, values checked, one verdict line and one result file per rank
and attempt.

    torchrun_worker.py --api dist|hvd --out DIR [--fail-rank R [--fail-how raise|kill]] [--big N]

--api dist: torch.distributed.init_process_group(backend="kolo") through env:// (torchrun's
  MASTER_ADDR/MASTER_PORT), then all_reduce (SUM, MAX, one large), all_gather, broadcast
  from a non-zero root, reduce_scatter and barrier through torch.distributed.
--api hvd: kolo.torch (Horovod's API): hvd.init() with torchrun's variables alone (kolo.torch
  makes its world through torch's env:// store, kolo/torch/_state.py; a world of 1 on every
  rank is the verdict "noworld"), then allreduce (Sum, Average, async, large), allgather and
  broadcast.
--fail-rank R: on torchrun's first attempt (TORCHELASTIC_RESTART_COUNT 0) rank R raises
  (--fail-how raise) or SIGKILLs itself (--fail-how kill) after kolo has come up and run one
  allreduce, while the others are entering the next one; torchrun's agents then restart the
  whole group, and the second attempt must pass.

Result file DIR/<api>.a<attempt>.r<rank>: "ok", "fail: ..." or "noworld"; DIR/<api>.a0.r<R>.died
marks the planned death. The verdict line: "<api> rank R attempt A: N checks, M failed"."""
import argparse
import os
import signal
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--api", choices=("dist", "hvd"), required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-how", choices=("raise", "kill"), default="raise",
                    help="the planned death: an exception (kolo's exit handlers run) or SIGKILL (none do)")
parser.add_argument("--big", type=int, default=1 << 20, help="elements of the large allreduce")
args = parser.parse_args()

env = os.environ
rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
local_rank, local_size = int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"])
attempt = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
label = f"{args.api} rank {rank} attempt {attempt}"
result_path = os.path.join(args.out, f"{args.api}.a{attempt}.r{rank}")
host = socket.gethostname()
failures, counted = [], [0]
started = time.monotonic()


def expect(ok, what):
    counted[0] += 1
    if not ok:
        failures.append(what)


def verdict(text):
    with open(result_path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.rename(result_path + ".tmp", result_path)


def planned_death():
    """The first attempt's failure of rank --fail-rank, after kolo is up and has run once."""
    if attempt == 0 and rank == args.fail_rank:
        open(result_path + ".died", "w").close()
        print(f"{label}: failing on purpose (first attempt, {args.fail_how}) on {host}", flush=True)
        if args.fail_how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"rank {rank} fails on purpose on torchrun's first attempt")


import torch  # noqa: E402 - after the arguments: an error in them is reported sooner

# What every rank knows of the others without kolo: torchrun's placement. Ranks on a host
# are consecutive (torch's assignment: GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK).
expect(rank == int(env["GROUP_RANK"]) * local_size + local_rank,
       f"torchrun's rank {rank} is not GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK")
host_index = int(host.rsplit("-h", 1)[1]) if "-h" in host else -1

try:
    if args.api == "dist":
        import torch.distributed as dist
        import kolo.torch.distributed as kd

        dist.init_process_group(backend="kolo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        pg = dist.distributed_c10d._get_default_group()
        expect(dist.get_backend() == "kolo", f"backend {dist.get_backend()}")
        expect(isinstance(pg, kd.KoloProcessGroup), f"default group {type(pg).__name__}")
        expect(dist.get_rank() == rank and dist.get_world_size() == size,
               f"rank/size {dist.get_rank()}/{dist.get_world_size()}, torchrun's {rank}/{size}")
        launch = kd.launched()
        expect(launch.launcher == "torchrun" and launch.local_rank == local_rank and launch.local_size == local_size,
               f"launched() {launch}")

        t = torch.full((1000,), float(rank + 1))
        dist.all_reduce(t)
        expect(torch.equal(t, torch.full((1000,), size * (size + 1) / 2)), f"all_reduce SUM: {t[:3].tolist()}")
        planned_death()

        t = torch.tensor([rank * 10.0, -rank], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        expect(t.tolist() == [(size - 1) * 10.0, 0.0], f"all_reduce MAX: {t.tolist()}")

        big = torch.arange(args.big, dtype=torch.float32) + rank
        dist.all_reduce(big)
        want = torch.arange(args.big, dtype=torch.float32) * size + size * (size - 1) / 2
        expect(torch.equal(big, want), f"all_reduce of {args.big} floats: {(big - want).abs().max().item()} off")

        outs = [torch.empty(3, dtype=torch.int32) for _ in range(size)]
        dist.all_gather(outs, torch.tensor([rank, host_index, local_rank], dtype=torch.int32))
        got = [o.tolist() for o in outs]
        expect([g[0] for g in got] == list(range(size)), f"all_gather ranks: {got}")
        # Every host holds local_size ranks, consecutive, local ranks 0.. in order.
        for r, (_, h, lr) in enumerate(got):
            expect(h == got[r - lr][1] and lr == r % local_size, f"all_gather placement: {got}")
        expect(len({g[1] for g in got}) == size // local_size, f"all_gather hosts: {got}")

        root = size - 1
        b = torch.full((5,), 7.0 * (rank + 1)) if rank == root else torch.zeros(5)
        dist.broadcast(b, src=root)
        expect(torch.equal(b, torch.full((5,), 7.0 * size)), f"broadcast from {root}: {b.tolist()}")

        out = torch.zeros(2)
        dist.reduce_scatter(out, [torch.full((2,), float(rank * size + q)) for q in range(size)])
        want = torch.full((2,), float(sum(r * size + rank for r in range(size))))
        expect(torch.equal(out, want), f"reduce_scatter: {out.tolist()}, want {want.tolist()}")

        dist.barrier()
        dist.destroy_process_group()
    else:
        import kolo.torch as hvd

        hvd.init()
        if hvd.size() == 1 and size > 1:
            print(f"{label}: NOWORLD: hvd.init() under torchrun alone made a world of 1 (rank {hvd.rank()}), "
                  f"torchrun's WORLD_SIZE is {size}", flush=True)
            verdict("noworld")
            sys.exit(0)
        expect(hvd.size() == size and hvd.rank() == rank, f"hvd rank/size {hvd.rank()}/{hvd.size()}")
        expect(hvd.local_size() == local_size and hvd.local_rank() == local_rank,
               f"hvd local {hvd.local_rank()}/{hvd.local_size()}, torchrun's {local_rank}/{local_size}")
        expect(hvd.cross_size() == size // local_size, f"hvd cross_size {hvd.cross_size()}")

        t = hvd.allreduce(torch.full((1000,), float(rank + 1)), op=hvd.Sum, name="sum")
        expect(torch.equal(t, torch.full((1000,), size * (size + 1) / 2)), f"allreduce Sum: {t[:3].tolist()}")
        planned_death()

        t = hvd.allreduce(torch.tensor([float(rank), 2.0 * rank]), name="avg")  # Average (Horovod's default)
        expect(torch.allclose(t, torch.tensor([(size - 1) / 2, size - 1.0])), f"allreduce Average: {t.tolist()}")

        handles = [hvd.allreduce_async(torch.full((10,), float(rank * i)), op=hvd.Sum, name=f"async.{i}")
                   for i in range(4)]
        for i, h in enumerate(handles):
            got = hvd.synchronize(h)
            expect(torch.equal(got, torch.full((10,), float(i * size * (size - 1) / 2))), f"async {i}: {got[:2]}")

        big = hvd.allreduce(torch.arange(args.big, dtype=torch.float32) + rank, op=hvd.Sum, name="big")
        want = torch.arange(args.big, dtype=torch.float32) * size + size * (size - 1) / 2
        expect(torch.equal(big, want), f"allreduce of {args.big} floats: {(big - want).abs().max().item()} off")

        # allgather: rank r gives r+1 rows (uneven first dimensions).
        g = hvd.allgather(torch.full((rank + 1, 2), rank, dtype=torch.int32), name="gather")
        want = torch.cat([torch.full((r + 1, 2), r, dtype=torch.int32) for r in range(size)])
        expect(torch.equal(g, want), f"allgather: {g.tolist()}")

        root = size - 1
        b = hvd.broadcast(torch.full((5,), 7.0 * (rank + 1)), root_rank=root, name="bcast")
        expect(torch.equal(b, torch.full((5,), 7.0 * size)), f"broadcast from {root}: {b.tolist()}")
        hvd.barrier()
        hvd.shutdown()
except Exception as e:  # noqa: BLE001 - the rank's failure, reported
    if attempt == 0 and rank == args.fail_rank and os.path.exists(result_path + ".died"):
        raise  # the planned death: torchrun must see this worker fail
    failures.append(f"{type(e).__name__}: {e}")

seconds = time.monotonic() - started
print(f"{label}: {counted[0]} checks, {len(failures)} failed ({host}, local rank {local_rank}, {seconds:.1f} s)",
      flush=True)
for f in failures:
    print(f"{label}: FAIL {f}", flush=True)
verdict("ok" if not failures else "fail: " + "; ".join(failures))
sys.exit(1 if failures else 0)
