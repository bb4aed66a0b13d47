"""kolo.torch under kolorun (1-5 ranks): Horovod's PyTorch API on kolo, checked against
what each call must give (computed locally from every rank's known inputs), and a small
training run with DistributedOptimizer that must match one process training on the whole
batch. Exits non-zero with the failures listed."""
import ast
import pathlib
import sys
import time

import torch

import kolo.torch as hvd

failures = []
checks = 0


def expect(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def import_circles():
    """Circles of imports among kolo.torch's modules, function-level imports included (a
    module that imports another only inside a function still needs it), read from the
    source: each a list of module names. The package (__init__.py) is left out: its
    modules import it late for what it makes."""
    package = pathlib.Path(hvd.__file__).parent
    modules = {f.stem for f in package.glob("*.py")} - {"__init__"}
    needs = {m: set() for m in modules}
    for m in modules:
        for node in ast.walk(ast.parse((package / f"{m}.py").read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[2] for a in node.names if a.name.startswith("kolo.torch.")]
            elif isinstance(node, ast.ImportFrom):
                base = "kolo.torch" if node.level == 1 else node.module if node.level == 0 else None
                if node.level == 1 and node.module:
                    base += "." + node.module
                if base == "kolo.torch":
                    names = [a.name for a in node.names]
                elif base and base.startswith("kolo.torch."):
                    names = [base.split(".")[2]]
            needs[m].update(x for x in names if x in modules and x != m)
    circles, done = [], set()

    def visit(m, path):
        for x in sorted(needs[m]):
            if x in path:
                circles.append(path[path.index(x):] + [x])
            elif x not in done:
                visit(x, path + [x])
        done.add(m)

    for m in sorted(modules):
        if m not in done:
            visit(m, [m])
    return circles


circles = import_circles()
expect(not circles, f"kolo.torch's modules import each other: {[' -> '.join(c) for c in circles]}")

hvd.init()
n, me = hvd.size(), hvd.rank()
expect(hvd.is_initialized() and 0 <= me < n, "init, size, rank")
expect(hvd.local_size() == n and hvd.cross_size() == 1, "one host: local_size = size")
expect(not hvd.mpi_built() and hvd.kolo_built(), "capability queries")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.int8,
          torch.uint8]


def values(rank, count, dtype):
    """Small integers: exact in every dtype, products included."""
    base = torch.arange(count, dtype=torch.int64) % 3 + 1 + (rank % 2)
    return base.to(dtype)


def reference(op, count, dtype):
    per_rank = [values(r, count, torch.float64) for r in range(n)]
    if op == hvd.Sum:
        out = sum(per_rank)
    elif op == hvd.Average:
        out = sum(per_rank) / n
    elif op == hvd.Min:
        out = torch.stack(per_rank).min(0).values
    elif op == hvd.Max:
        out = torch.stack(per_rank).max(0).values
    else:
        out = torch.stack(per_rank).prod(0)
    return out


# ---- allreduce: every dtype x op, sizes, in place and not, async --------------------------
for dtype in DTYPES:
    for op in [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]:
        if op == hvd.Product and dtype in (torch.int8, torch.uint8) and n > 4:
            continue  # 2^n overflows 8 bits
        if op == hvd.Average and not dtype.is_floating_point:
            continue  # Horovod's Average of integers truncates: not compared
        for count in [1, 7, 1000]:
            want = reference(op, count, dtype).to(dtype)
            # Sums of small integers are exact; an average is within a rounding of the type.
            tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-6}.get(dtype, 1e-15)
            same = (lambda a, b: torch.equal(a, b)) if op != hvd.Average else \
                (lambda a, b: torch.allclose(a.double(), b.double(), rtol=tol, atol=0))
            got = hvd.allreduce(values(me, count, dtype), op=op, name=f"ar.{dtype}.{op}.{count}")
            expect(same(got, want), f"allreduce {dtype} {op} {count}: {got[:4]} != {want[:4]}")
            t = values(me, count, dtype)
            h = hvd.allreduce_async_(t, op=op, name=f"ari.{dtype}.{op}.{count}")
            hvd.synchronize(h)
            expect(same(t, want), f"allreduce_ {dtype} {op} {count}")

x = torch.full((10,), float(me + 1))
got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5, name="scaled")
expect(torch.allclose(got, torch.full((10,), float(n * (n + 1) / 2))), f"pre/postscale: {got[0]}")
h = hvd.allreduce_async(torch.ones(100) * me, name="polled")
deadline = time.monotonic() + 60
while not hvd.poll(h) and time.monotonic() < deadline:
    time.sleep(0.0005)
expect(torch.equal(hvd.synchronize(h), torch.full((100,), (n - 1) / 2)), "allreduce_async + poll (average)")
expect(torch.equal(hvd.allreduce(torch.ones(3, 4).t(), op=hvd.Sum, name="strided"), torch.full((4, 3), float(n))),
       "allreduce of a non-contiguous tensor")

outs = hvd.grouped_allreduce([torch.ones(5) * me, torch.ones(3, 3) * 2], op=hvd.Sum, name="grouped")
expect(torch.equal(outs[0], torch.full((5,), float(n * (n - 1) / 2))) and torch.equal(outs[1], torch.full((3, 3), 2.0 * n)),
       "grouped_allreduce")

# ---- allgather (rows differ per rank), broadcast, alltoall, reducescatter ----------------------
rows = me + 1
g = hvd.allgather(torch.full((rows, 2), float(me)), name="gather")
want = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(n)])
expect(torch.equal(g, want), f"allgather: {g.shape} vs {want.shape}")
g0 = hvd.allgather(torch.zeros(0, 3) if me == 0 else torch.ones(1, 3), name="gather.empty")
expect(g0.shape == (n - 1, 3), f"allgather with an empty rank: {g0.shape}")

b = torch.arange(6, dtype=torch.float64) * (me + 1)
root = n - 1
out = hvd.broadcast(b, root, name="bcast")
expect(torch.equal(out, torch.arange(6, dtype=torch.float64) * n), "broadcast")
expect(torch.equal(b, torch.arange(6, dtype=torch.float64) * (me + 1)), "broadcast leaves its input alone")
hvd.broadcast_(b, root, name="bcast_")
expect(torch.equal(b, torch.arange(6, dtype=torch.float64) * n), "broadcast_")

splits = [(me + q) % 3 for q in range(n)]  # rows for rank q
send = torch.cat([torch.full((splits[q], 2), float(100 * me + q)) for q in range(n)]) if sum(splits) else torch.zeros(0, 2)
recv, received = hvd.alltoall(send, splits=splits, name="a2a")
want = torch.cat([torch.full(((r + me) % 3, 2), float(100 * r + me)) for r in range(n)])
expect(torch.equal(recv, want) and received.tolist() == [(r + me) % 3 for r in range(n)],
       f"alltoall with splits: {recv.shape} {received.tolist()}")
eq = hvd.alltoall(torch.arange(2 * n, dtype=torch.int32) + 1000 * me, name="a2a.equal")
expect(torch.equal(eq, torch.tensor([1000 * r + 2 * me + k for r in range(n) for k in range(2)], dtype=torch.int32)),
       "alltoall, equal splits")

rs = hvd.reducescatter(torch.ones(2 * n, 3) * (me + 1), op=hvd.Sum, name="rs")
expect(rs.shape == (2, 3) and torch.equal(rs, torch.full((2, 3), float(n * (n + 1) / 2))), f"reducescatter {rs.shape}")

flags = torch.tensor([me % 2 == 0, True, False, me == 0])
hvd.broadcast_(flags, 0, name="bcast.bool")
expect(flags.tolist() == [True, True, False, True], f"broadcast of a bool tensor: {flags.tolist()}")
shorts = torch.arange(6, dtype=torch.int16).reshape(2, 3) * (me + 1)
expect(torch.equal(hvd.broadcast(shorts, n - 1, name="bcast.int16"), torch.arange(6, dtype=torch.int16).reshape(2, 3) * n),
       "broadcast of an int16 tensor")
obj = hvd.broadcast_object({"rank": me, "list": [1, 2, me]}, root_rank=0)
expect(obj == {"rank": 0, "list": [1, 2, 0]}, f"broadcast_object: {obj}")
expect(hvd.allgather_object(("r", me)) == [("r", r) for r in range(n)], "allgather_object")
hvd.barrier()

# ---- autograd --------------------------------------------------------------------------
w = torch.ones(4, requires_grad=True)
y = hvd.allreduce(w * (me + 1), op=hvd.Sum, name="grad.ar")
y.sum().backward()
expect(torch.equal(w.grad, torch.full((4,), float(n * (me + 1)))), f"allreduce gradient: {w.grad}")
v = torch.ones(me + 1, 2, requires_grad=True)
gathered = hvd.allgather(v, name="grad.ag")
(gathered * 3).sum().backward()
# Horovod's allgather gradient: the output's gradient averaged over the ranks, this rank's rows.
expect(torch.equal(v.grad, torch.full((me + 1, 2), 3.0)), f"allgather gradient: {v.grad}")

# ---- process sets: the even ranks, and a set of rank 0 alone -------------------------------
evens = hvd.add_process_set([r for r in range(0, n, 2)])
solo = hvd.add_process_set(hvd.ProcessSet([0]))
expect(evens.included() == (me % 2 == 0) and solo.included() == (me == 0), "process set membership")
if me % 2 == 0:
    s = hvd.allreduce(torch.full((3,), float(me)), op=hvd.Sum, process_set=evens)
    expect(torch.equal(s, torch.full((3,), float(sum(range(0, n, 2))))), f"allreduce in a process set: {s}")
    got = hvd.allgather(torch.tensor([me]), process_set=evens)
    expect(got.tolist() == list(range(0, n, 2)), f"allgather in a process set: {got.tolist()}")
    expect(evens.rank() == me // 2 and evens.size() == len(range(0, n, 2)), "process set rank and size")
    expect(hvd.broadcast_object(me, root_rank=0, process_set=evens) == 0, "broadcast_object in a process set")
else:
    try:
        hvd.allreduce(torch.ones(1), process_set=evens)
        expect(False, "an odd rank ran an allreduce of the even ranks' set")
    except ValueError as e:
        expect("not in" in str(e), f"process set refusal: {e}")
if me == 0:
    expect(torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=solo), torch.ones(2)), "a set of one")
after = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after.sets")  # the world still works, named alike
expect(after.item() == n, "world allreduce after process sets")
expect(hvd.remove_process_set(evens) and hvd.remove_process_set(solo), "remove_process_set")

# ---- SyncBatchNorm: this rank's rows of a batch = BatchNorm on the whole batch --------------
torch.manual_seed(5)
full = torch.randn(4 * n, 3, 5, 5, dtype=torch.float64)
coef = torch.randn(4 * n, 3, 5, 5, dtype=torch.float64)
ref_bn = torch.nn.BatchNorm2d(3).double()
xr = full.clone().requires_grad_()
(ref_bn(xr) * coef).sum().backward()
sync_bn = hvd.SyncBatchNorm(3).double()
xs = full.chunk(n)[me].clone().requires_grad_()
ys = sync_bn(xs)
(ys * coef.chunk(n)[me]).sum().backward()
ref2 = torch.nn.BatchNorm2d(3).double()  # a fresh one: its running statistics after one batch
expect(torch.allclose(ys, ref2(full).chunk(n)[me], atol=1e-10), "SyncBatchNorm output = BatchNorm of the whole batch")
expect(torch.allclose(xs.grad, xr.grad.chunk(n)[me], atol=1e-10), "SyncBatchNorm input gradient")
expect(torch.allclose(hvd.allreduce(sync_bn.weight.grad, op=hvd.Sum), ref_bn.weight.grad, atol=1e-9),
       "SyncBatchNorm weight gradient, summed over ranks")
expect(torch.allclose(sync_bn.running_mean, ref2.running_mean, atol=1e-12) and
       torch.allclose(sync_bn.running_var, ref2.running_var, atol=1e-12), "SyncBatchNorm running statistics")

# ---- errors ------------------------------------------------------------------------------
for bad, kind in [(lambda: hvd.reducescatter(torch.ones(2 * n), op=hvd.Adasum), NotImplementedError),
                  (lambda: hvd.allreduce(torch.ones(2, dtype=torch.bool)), TypeError),
                  (lambda: hvd.broadcast(torch.ones(2), n + 3), ValueError),
                  (lambda: hvd.alltoall(torch.ones(n + 1, 1)) if n > 1 else hvd.alltoall(torch.ones(1, 1), splits=[2]),
                   ValueError)]:
    try:
        bad()
        expect(False, f"no {kind.__name__} raised")
    except kind as e:
        expect(str(e).startswith("kolo.torch"), f"error text: {e}")
# A mismatch between ranks is kolo's error, with kolo_last_error's words.
if n > 1:
    try:
        hvd.allreduce(torch.ones(3 + me), name="mismatched")
        expect(False, "a mismatched allreduce passed")
    except hvd.HorovodInternalError as e:
        expect("MISMATCH" in str(e) or "mismatch" in str(e), f"mismatch error: {e}")

# ---- Compression.fp16 on one host: kolo's wire (each contribution encoded once, fp32 sum) --
# 2048 and 1s are exact in fp16, 2048 + (n - 1) is not (fp16 has 11 significant bits): a
# cast-then-fp16-sum gives 2048, kolo's fp32 accumulation gives the exact sum.
if n > 1:
    t = torch.full((16,), 2048.0 if me == 0 else 1.0)
    out = hvd.allreduce(t, op=hvd.Sum, compression=hvd.Compression.fp16)
    expect(out.dtype == torch.float32 and bool((out == 2048.0 + (n - 1)).all()),
           f"Compression.fp16 sums in fp32 on one host: got {out[0].item()}, want {2048 + n - 1}")
    out = hvd.allreduce(t.double(), op=hvd.Sum, compression=hvd.Compression.fp16)  # not fp32: cast, as Horovod
    expect(out.dtype == torch.float64, f"Compression.fp16 of float64 comes back as float64, got {out.dtype}")

# ---- training: DistributedOptimizer == one process on the whole batch ---------------------
def train(model, opt, batches, distributed):
    for xb, yb in batches:
        if distributed:  # this rank's share of the batch
            xb, yb = xb.chunk(n)[me], yb.chunk(n)[me]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
    return model


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()


torch.manual_seed(7)
batches = [(torch.randn(4 * n, 5, dtype=torch.float64), torch.randn(4 * n, 1, dtype=torch.float64)) for _ in range(5)]
for variant in ["plain", "groups", "fp16", "accumulate"]:
    reference_model = make_model(1)
    reference_opt = torch.optim.SGD(reference_model.parameters(), lr=0.1, momentum=0.9)
    model = make_model(100 + me)  # different on every rank until broadcast
    base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16 if variant == "fp16" else hvd.Compression.none,
                                   num_groups=2 if variant == "groups" else 0,
                                   backward_passes_per_step=2 if variant == "accumulate" else 1)
    if me == 0:
        model.load_state_dict(reference_model.state_dict())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    if variant == "accumulate":  # two half-batches per step, each gradient a mean over half
        for xb, yb in batches:
            xs, ys = xb.chunk(n)[me], yb.chunk(n)[me]
            opt.zero_grad()
            for part in range(2):
                loss = torch.nn.functional.mse_loss(model(xs.chunk(2)[part]), ys.chunk(2)[part]) / 2
                loss.backward()
            opt.step()
    else:
        train(model, opt, batches, True)
    train(reference_model, reference_opt, batches, False)
    tol = 2e-3 if variant == "fp16" else 1e-10
    for (name, p), q in zip(model.named_parameters(), reference_model.parameters()):
        expect(torch.allclose(p, q, atol=tol, rtol=tol), f"training ({variant}): {name} differs by "
                                                         f"{(p - q).abs().max().item():.3g}")
    synced = hvd.allgather_object([p.detach().clone() for p in model.parameters()])
    expect(all(all(torch.equal(a, b) for a, b in zip(synced[0], s)) for s in synced),
           f"training ({variant}): ranks' parameters differ")

# Horovod's gradient clipping pattern: synchronize, clip, step without synchronizing again.
model = make_model(1)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(),
                               op=hvd.Sum)
opt.zero_grad()
torch.nn.functional.mse_loss(model(batches[0][0].chunk(n)[me]), batches[0][1].chunk(n)[me]).backward()
opt.synchronize()
summed = [p.grad.clone() for p in model.parameters()]
with opt.skip_synchronize():
    opt.step()
expect(all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), summed)),
       "skip_synchronize: step() does not allreduce the gradients again")

print(f"rank {me}: kolo.torch: {checks} checks, {len(failures)} failed")
for f in failures:
    print(f"rank {me}: FAIL {f}")
hvd.shutdown()
sys.exit(1 if failures or checks == 0 else 0)
