"""kolo as a torch.distributed backend under kolorun: init_process_group("kolo") through
kolo.torch.distributed.init_process_group (a private file store; argv[1]: a file store of
that path instead), the collectives checked against their definition, and DDP training
that must match one process on the whole batch. Exits non-zero with the failures."""
import os
import sys

import torch
import torch.distributed as dist
import torch._C._distributed_c10d as c10d

import kolo.torch.distributed

me, n = int(os.environ["KOLO_RANK"]), int(os.environ["KOLO_SIZE"])
if len(sys.argv) > 1:
    dist.init_process_group("kolo", init_method=f"file://{sys.argv[1]}", rank=me, world_size=n)
else:
    launch = kolo.torch.distributed.init_process_group("kolo")
    assert (launch.rank, launch.size, launch.launcher) == (me, n, "kolorun"), launch
failures, checks = [], 0


def expect(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


expect(dist.get_rank() == me and dist.get_world_size() == n and dist.get_backend() == "kolo", "group basics")
for dtype in [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.uint8]:
    for op, ref in [(dist.ReduceOp.SUM, lambda v: sum(v)), (dist.ReduceOp.MAX, lambda v: max(v)),
                    (dist.ReduceOp.MIN, lambda v: min(v)), (dist.ReduceOp.PRODUCT, lambda v: 1 if not v else
                                                            __import__("math").prod(v))]:
        t = torch.full((5,), me % 3 + 1, dtype=dtype)
        dist.all_reduce(t, op=op)
        want = ref([r % 3 + 1 for r in range(n)])
        expect(torch.equal(t, torch.full((5,), want, dtype=dtype)), f"all_reduce {dtype} {op}: {t[0]} != {want}")
b = torch.arange(4.0) * (me + 1)
dist.broadcast(b, src=n - 1)
expect(torch.equal(b, torch.arange(4.0) * n), "broadcast")
flags = torch.tensor([me == 0, me != 0])
dist.broadcast(flags, src=0)
expect(flags.tolist() == [True, False], f"broadcast of bools: {flags.tolist()}")
outs = [torch.zeros(3) for _ in range(n)]
dist.all_gather(outs, torch.full((3,), float(me)))
expect(all(torch.equal(o, torch.full((3,), float(r))) for r, o in enumerate(outs)), "all_gather")
flat = torch.zeros(2 * n)
dist._all_gather_base(flat, torch.full((2,), float(me)))
expect(torch.equal(flat, torch.tensor([float(r) for r in range(n) for _ in range(2)])), "all_gather into a tensor")
rs = torch.zeros(2)
dist.reduce_scatter(rs, [torch.full((2,), float(q + me)) for q in range(n)])
expect(torch.equal(rs, torch.full((2,), float(sum(me + r for r in range(n))))), f"reduce_scatter {rs}")
red = torch.full((3,), float(me + 1))
dist.reduce(red, dst=0)
if me == 0:
    expect(torch.equal(red, torch.full((3,), float(n * (n + 1) / 2))), "reduce at the root")
a2a_in = torch.tensor([float(100 * me + q) for q in range(n)])
a2a_out = torch.zeros(n)
dist.all_to_all_single(a2a_out, a2a_in)
expect(torch.equal(a2a_out, torch.tensor([float(100 * r + me) for r in range(n)])), "all_to_all_single")
ins = [(me + q) % 2 + 1 for q in range(n)]  # rows for rank q
outs_rows = [(r + me) % 2 + 1 for r in range(n)]
src = torch.cat([torch.full((ins[q], 2), float(10 * me + q)) for q in range(n)])
dst = torch.zeros(sum(outs_rows), 2)
dist.all_to_all_single(dst, src, output_split_sizes=outs_rows, input_split_sizes=ins)
expect(torch.equal(dst, torch.cat([torch.full((outs_rows[r], 2), float(10 * r + me)) for r in range(n)])),
       "all_to_all_single with splits")
# all_to_all of lists: strided inputs and outputs (columns of a matrix).
src_m = torch.stack([torch.full((3,), float(10 * me + q)) for q in range(n)], dim=1)  # column q for rank q
dst_m = torch.zeros(3, n)
dist.all_to_all(list(dst_m.unbind(1)), list(src_m.unbind(1)))
expect(torch.equal(dst_m, torch.stack([torch.full((3,), float(10 * r + me)) for r in range(n)], dim=1)),
       f"all_to_all of strided tensors: {dst_m}")
if n > 1:
    if me == 0:
        dist.send(torch.arange(5.0), dst=1)
    elif me == 1:
        got = torch.zeros(5)
        dist.recv(got, src=0)
        expect(torch.equal(got, torch.arange(5.0)), "send/recv")
dist.barrier()

# torch 2.x's interface, checked here on whichever torch runs this. Registration: the
# keyword arguments kolo gives Backend.register_backend, for the signatures torch has had
# (1.13: extended_api; 2.x: devices too; and one taking neither).
options = kolo.torch.distributed._registration_options


def sig_113(name, func, extended_api=False):
    pass


def sig_2x(name, func, extended_api=False, devices=None):
    pass


def sig_plain(name, func):
    pass


expect(options(sig_113) == {"extended_api": False}, f"registration options for torch 1.13: {options(sig_113)}")
expect(options(sig_2x) == {"extended_api": False, "devices": ["cpu", "cuda"]},
       f"registration options for torch 2.x: {options(sig_2x)}")
expect(options(sig_plain) == {}, f"registration options without either: {options(sig_plain)}")
expect(options(dist.Backend.register_backend) == {
    k: v for k, v in {"extended_api": False, "devices": ["cpu", "cuda"]}.items()
    if k in __import__("inspect").signature(dist.Backend.register_backend).parameters},
    "registration options for this torch")
capability = getattr(dist.Backend, "backend_capability", None)  # torch 2.x keeps what each backend serves
if capability is not None:
    expect(capability.get("kolo") == ["cpu", "cuda"], f"kolo's devices as torch has them: {capability.get('kolo')}")
# The collectives under the names torch 2.x's C++ side calls in a Python ProcessGroup (and
# the coalesced forms), called directly on the group.
pg = dist.distributed_c10d._get_default_group()
if isinstance(pg, kolo.torch.distributed.KoloProcessGroup):
    flat = torch.zeros(2 * n)
    pg.all_gather_single(flat, torch.full((2,), float(me)), c10d.AllgatherOptions()).wait()
    expect(torch.equal(flat, torch.tensor([float(r) for r in range(n) for _ in range(2)])), "all_gather_single")
    outs2, ins2 = [torch.zeros(n), torch.zeros(3 * n)], [torch.full((1,), float(me)), torch.full((3,), float(-me))]
    pg.all_gather_single_coalesced(outs2, ins2, c10d.AllgatherOptions()).wait()
    expect(torch.equal(outs2[0], torch.arange(float(n))) and
           torch.equal(outs2[1], -torch.arange(float(n)).repeat_interleave(3)), f"all_gather_single_coalesced {outs2}")
    rs_opts = c10d.ReduceScatterOptions()
    rs_opts.reduceOp = dist.ReduceOp.SUM
    rs1 = torch.zeros(2)
    pg.reduce_scatter_single(rs1, torch.arange(2.0 * n) + me, rs_opts).wait()
    expect(torch.equal(rs1, (torch.arange(2.0 * n) * n + sum(range(n)))[2 * me:2 * me + 2]),
           f"reduce_scatter_single {rs1}")
    rs2 = [torch.zeros(1), torch.zeros(2)]
    pg.reduce_scatter_single_coalesced(rs2, [torch.ones(n), torch.ones(2 * n) * 2], rs_opts).wait()
    expect(torch.equal(rs2[0], torch.full((1,), float(n))) and torch.equal(rs2[1], torch.full((2,), 2.0 * n)),
           f"reduce_scatter_single_coalesced {rs2}")
    a2a = torch.zeros(n)
    pg.all_to_all_single(a2a, torch.tensor([float(100 * me + q) for q in range(n)]), [], [],
                         c10d.AllToAllOptions()).wait()
    expect(torch.equal(a2a, torch.tensor([float(100 * r + me) for r in range(n)])), "all_to_all_single (method)")
    # Called without options, as a DDP communication hook may: torch's defaults (SUM, root 0).
    t0 = torch.full((3,), float(me + 1))
    pg.allreduce([t0]).wait()
    expect(torch.equal(t0, torch.full((3,), float(n * (n + 1) / 2))), f"pg.allreduce without options: {t0}")
    b0 = torch.full((2,), float(me))
    pg.broadcast([b0]).wait()
    expect(torch.equal(b0, torch.zeros(2)), f"pg.broadcast without options: {b0}")
else:
    expect(False, f"the default group is a {type(pg).__name__}, not kolo's")
# scatter and gather through torch.distributed, every rank the root in turn, odd shapes and
# an integer dtype; all_gather_coalesced (outputs[r][i] = rank r's inputs[i]).
for root in range(n):
    got = torch.zeros(3, dtype=torch.int32)
    pieces = [torch.full((3,), 10 * root + q, dtype=torch.int32) for q in range(n)] if me == root else None
    dist.scatter(got, pieces, src=root)
    expect(torch.equal(got, torch.full((3,), 10 * root + me, dtype=torch.int32)), f"scatter from {root}: {got}")
    into = [torch.zeros(2, 2) for _ in range(n)] if me == root else None
    dist.gather(torch.full((2, 2), float(me * me)), into, dst=root)
    if me == root:
        expect(all(torch.equal(into[r], torch.full((2, 2), float(r * r))) for r in range(n)), f"gather to {root}: {into}")
coalesced = [[torch.zeros(1), torch.zeros(2)] for _ in range(n)]
dist.all_gather_coalesced(coalesced, [torch.full((1,), float(me)), torch.full((2,), float(-me))])
expect(all(torch.equal(coalesced[r][0], torch.full((1,), float(r))) and
           torch.equal(coalesced[r][1], torch.full((2,), float(-r))) for r in range(n)),
       f"all_gather_coalesced: {coalesced}")
# abort(): a group's pending and later calls fail, the communicator is gone; the others go on.
side = dist.new_group(list(range(n)))
t = torch.ones(2)
dist.all_reduce(t, group=side)
expect(torch.equal(t, torch.full((2,), float(n))), "all_reduce on a second group")
dist.barrier()
side.abort()
try:
    side.barrier()
    expect(False, "barrier on an aborted group did not raise")
except RuntimeError:
    pass
dist.barrier()

# DDP: the average of the ranks' gradients on their shares of a batch = one process on it.
torch.manual_seed(3)
batches = [(torch.randn(4 * n, 6, dtype=torch.float64), torch.randn(4 * n, 2, dtype=torch.float64)) for _ in range(4)]


def make():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)).double()


reference, model = make(), make()
ddp = torch.nn.parallel.DistributedDataParallel(model)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
for xb, yb in batches:
    opt.zero_grad()
    torch.nn.functional.mse_loss(ddp(xb.chunk(n)[me]), yb.chunk(n)[me]).backward()
    opt.step()
    ref_opt.zero_grad()
    torch.nn.functional.mse_loss(reference(xb), yb).backward()
    ref_opt.step()
for p, q in zip(model.parameters(), reference.parameters()):
    expect(torch.allclose(p, q, atol=1e-10), f"DDP training differs by {(p - q).abs().max().item():.3g}")

print(f"rank {me}: kolo backend: {checks} checks, {len(failures)} failed")
for f in failures:
    print(f"rank {me}: FAIL {f}")
dist.barrier()
dist.destroy_process_group()
# argv[1]: torch's FileStore removes the file itself once the last rank lets go of it,
# which may happen between a check and a remove: a file already gone is fine. (The helper's
# store goes at exit.)
if me == 0 and len(sys.argv) > 1:
    try:
        os.remove(sys.argv[1])
    except FileNotFoundError:
        pass
sys.exit(1 if failures or checks == 0 else 0)
