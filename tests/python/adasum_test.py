"""kolo.torch's op=Adasum against an fp64 reference of Adasum's pairwise recursion, written
here from the definition (Horovod's documentation): allreduce in every float dtype, grouped
tensors each with their own coefficients, process sets, errors, and DistributedOptimizer's
delta rule. Any number of ranks (Horovod itself takes powers of two).
  kolorun -np N /usr/bin/python3 tests/python/adasum_test.py [--cuda]"""
import sys

import torch

import kolo.torch as hvd
from kolo_checks import expect, finish, section

hvd.init()
rank, size = hvd.rank(), hvd.size()
device = "cuda" if "--cuda" in sys.argv else "cpu"
if device == "cuda":
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())


def pair(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    tiny = 2.2250738585072014e-308 ** 0.5
    ca = 1 - dot / (2 * aa) if aa >= tiny else 1.0
    cb = 1 - dot / (2 * bb) if bb >= tiny else 1.0
    return ca * a + cb * b


def reference(vectors):
    """Ranks beyond the largest power of two p fold into the first ones, then a binary tree
    over the p vectors in rank order."""
    g = [v.double().flatten() for v in vectors]
    p = 1
    while p * 2 <= len(g):
        p *= 2
    for i in range(len(g) - p):
        g[i] = pair(g[i], g[i + p])
    g = g[:p]
    while len(g) > 1:
        g = [pair(g[k], g[k + 1]) for k in range(0, len(g), 2)]
    return g[0]


def every_rank(t, name):
    """Every rank's tensor, in rank order (allgather of one row each)."""
    rows = hvd.allgather(t.detach().reshape(1, -1).cpu(), name=name)
    return [rows[r] for r in range(size)]


TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 6e-3, torch.bfloat16: 5e-2}


def close(got, want, inputs, dtype):
    scale = max([float(want.norm())] + [float(v.double().norm()) for v in inputs]) or 1.0
    levels = max(1, (size - 1).bit_length())
    return float((got.double().flatten().cpu() - want).norm()) / scale <= TOLERANCE[dtype] * levels


@section
def allreduce_dtypes():
    torch.manual_seed(100 + rank)
    for dtype in TOLERANCE:
        for shape in [(1,), (17,), (4, 33), (1000,)]:
            x = torch.randn(*shape, dtype=torch.float64).to(dtype).to(device)
            inputs = every_rank(x.double(), f"in.{dtype}.{shape}")
            got = hvd.allreduce(x, op=hvd.Adasum, name=f"adasum.{dtype}.{shape}")
            expect(got.dtype == dtype and got.shape == x.shape and got.device == x.device,
                   f"adasum {dtype} {shape}: type, shape or device changed")
            expect(close(got, reference(inputs), inputs, dtype), f"adasum {dtype} {shape}: differs from the reference")
            same = every_rank(got.double(), f"out.{dtype}.{shape}")
            expect(all(torch.equal(same[0], s) for s in same), f"adasum {dtype} {shape}: ranks differ")


@section
def orthogonal_sum_and_parallel_average():
    n = 4 * size
    x = torch.zeros(n, dtype=torch.float64, device=device)
    x[rank::size] = torch.arange(1, 5, dtype=torch.float64) * (rank + 1)  # disjoint supports
    total = hvd.allreduce(x.clone(), op=hvd.Sum, name="ortho.sum")
    got = hvd.allreduce(x, op=hvd.Adasum, name="ortho.adasum")
    expect(torch.allclose(got, total, rtol=1e-12), "orthogonal gradients: Adasum is not their sum")
    if size & (size - 1) == 0:  # a balanced tree: parallel gradients average
        base = torch.linspace(-1, 1, 50, dtype=torch.float64, device=device)
        got = hvd.allreduce(base * (rank + 1), op=hvd.Adasum, name="parallel.adasum")
        want = base * sum(range(1, size + 1)) / size
        expect(torch.allclose(got, want, rtol=1e-12, atol=1e-14), "parallel gradients: Adasum is not their average")


@section
def stability():
    """Parallel gradients whose scales run from the type's smallest normal number to the
    square root of its largest (Horovod's stability tests): with a power of two, the
    average, to within 100 units of rounding of the norm."""
    if size & (size - 1):
        return
    for dtype in (torch.float16, torch.float32):
        info = torch.finfo(dtype)
        torch.manual_seed(2)
        a = torch.randn(1024, dtype=torch.float64)
        for label, scales in [("tiny", [info.tiny * (r + 1) for r in range(size)]),
                              ("wide", [info.max ** (0.5 * (r + 1) / size) * info.tiny ** ((size - r - 1) / size)
                                        for r in range(size)])]:
            q = [(a * s).to(dtype).double() for s in scales]
            x = q[rank].to(dtype).to(device)
            hvd.allreduce_(x, op=hvd.Adasum, name=f"stability.{dtype}.{label}")
            want = sum(q) / size
            off = float((x.double().cpu() - want).norm() / want.norm())
            expect(off < 100 * info.eps, f"stability {dtype} {label}: off by {off:.3g} of the norm")


@section
def grouped_and_scaled():
    torch.manual_seed(7 + rank)
    tensors = [torch.randn(n, dtype=torch.float32, device=device) for n in (3, 40, 1)]
    alone = [hvd.allreduce(t, op=hvd.Adasum, name=f"alone.{i}") for i, t in enumerate(tensors)]
    grouped = hvd.grouped_allreduce(tensors, op=hvd.Adasum, name="grouped")
    for i, (a, g) in enumerate(zip(alone, grouped)):
        expect(torch.allclose(a, g, rtol=1e-6, atol=1e-7), f"grouped adasum tensor {i}: not its own coefficients")
    # Fused by the runtime: many small async ones at once, each still its own.
    handles = [hvd.allreduce_async(t, op=hvd.Adasum, name=f"async.{i}") for i, t in enumerate(tensors)]
    for i, h in enumerate(handles):
        expect(torch.allclose(hvd.synchronize(h), alone[i], rtol=1e-6, atol=1e-7), f"async adasum {i}")
    scaled = hvd.allreduce(tensors[1], op=hvd.Adasum, prescale_factor=2.0, postscale_factor=0.25, name="scaled")
    expect(torch.allclose(scaled, alone[1] * 0.5, rtol=1e-5, atol=1e-6), "prescale 2, postscale 0.25: not half")


@section
def process_set():
    if size < 2:
        return
    members = list(range(0, size, 2)) if size > 2 else [0, 1]
    ps = hvd.add_process_set(members)
    try:
        if rank in members:
            torch.manual_seed(50 + rank)
            x = torch.randn(20, dtype=torch.float64, device=device)
            rows = hvd.allgather(x.reshape(1, -1).cpu(), name="ps.in", process_set=ps)
            got = hvd.allreduce(x, op=hvd.Adasum, name="ps.adasum", process_set=ps)
            expect(torch.allclose(got.cpu(), reference(list(rows)), rtol=1e-12, atol=1e-14),
                   "adasum in a process set differs from the reference over its members")
    finally:
        hvd.remove_process_set(ps)


@section
def errors():
    try:
        hvd.allreduce(torch.ones(4, dtype=torch.int32, device=device), op=hvd.Adasum, name="ints")
        expect(False, "adasum of int32 was not refused")
    except Exception as e:  # noqa: BLE001
        expect("Adasum" in str(e) or "ADASUM" in str(e), f"adasum of int32: unclear error {e}")
    try:
        hvd.reducescatter(torch.ones(size * 2, device=device), op=hvd.Adasum, name="rs")
        expect(False, "reducescatter with Adasum was not refused")
    except RuntimeError as e:  # Horovod's type (its suite checks it)
        expect("allreduce only" in str(e), f"reducescatter with Adasum: unclear error {e}")
    # The runtime still works.
    expect(float(hvd.allreduce(torch.ones(1, device=device), op=hvd.Sum, name="after").cpu()) == size,
           "allreduce after the refusals")


@section
def optimizer_delta_rule():
    """Each rank steps on its own gradient; the deltas are combined by Adasum; every rank
    ends at start + adasum(deltas)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3).double().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    lr = 0.1
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    for step in range(2):
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        torch.manual_seed(1000 * step + rank)
        x = torch.randn(8, 5, dtype=torch.float64, device=device)
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        for n, p in model.named_parameters():
            deltas = every_rank(-lr * grads[n], f"opt.{step}.{n}")
            want = before[n].flatten().cpu() + reference(deltas)
            expect(torch.allclose(p.detach().flatten().cpu(), want, rtol=1e-10, atol=1e-12),
                   f"step {step} {n}: not start + adasum(deltas)")
        after = every_rank(torch.cat([p.detach().flatten() for p in model.parameters()]), f"opt.same.{step}")
        expect(all(torch.equal(after[0], a) for a in after), f"step {step}: ranks' parameters differ")


finish(f"adasum rank {rank} of {size}")
