"""kolo.torch on CUDA tensors, for tools/gpu-check.sh: ranks sharing the GPU (kolorun -np 2).
allreduce (sum, average, in place), allgather, broadcast and alltoall of CUDA tensors,
checked against what each rank's known inputs give; then a few DistributedOptimizer steps
of a small model that must match one process training on the whole batch. Where torch has
no CUDA (the check's emulated mode), the same runs on CPU tensors. Exits non-zero with
the failures listed."""
import sys

import torch

import kolo.torch as hvd

failures = []
checks = 0


def expect(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


hvd.init()
n, me = hvd.size(), hvd.rank()
device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)


def rank_values(rank, count, dtype):
    return (torch.arange(count, dtype=torch.float64) % 5 + 1 + rank).to(dtype)


for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32):
    for count in (1, 1000, (1 << 20) + 3):
        want = sum(rank_values(r, count, torch.float64) for r in range(n))
        got = hvd.allreduce(rank_values(me, count, dtype).to(device), op=hvd.Sum, name=f"sum.{dtype}.{count}")
        expect(torch.equal(got.cpu().to(torch.float64), want), f"allreduce sum {dtype} {count}")
        t = rank_values(me, count, dtype).to(device)
        hvd.allreduce_(t, op=hvd.Sum, name=f"inplace.{dtype}.{count}")
        expect(torch.equal(t.cpu().to(torch.float64), want), f"allreduce_ in place {dtype} {count}")
    if dtype.is_floating_point:
        got = hvd.allreduce(rank_values(me, 1000, dtype).to(device), op=hvd.Average, name=f"avg.{dtype}")
        want = sum(rank_values(r, 1000, torch.float64) for r in range(n)) / n
        expect(torch.allclose(got.cpu().to(torch.float64), want, rtol=1e-2), f"allreduce average {dtype}")

gathered = hvd.allgather(torch.full((me + 1, 3), float(me), device=device), name="gather")
want = torch.cat([torch.full((r + 1, 3), float(r)) for r in range(n)])
expect(torch.equal(gathered.cpu(), want), "allgather of uneven first dimensions")

b = torch.arange(4099, dtype=torch.float32, device=device) * (me + 1)
hvd.broadcast_(b, root_rank=n - 1, name="bcast")
expect(torch.equal(b.cpu(), torch.arange(4099, dtype=torch.float32) * n), "broadcast_ from the last rank")

send = torch.arange(n * 5, dtype=torch.float32, device=device) + 100 * me
recv = hvd.alltoall(send, name="a2a")
want = torch.cat([torch.arange(me * 5, me * 5 + 5, dtype=torch.float32) + 100 * r for r in range(n)])
expect(torch.equal(recv.cpu(), want), "alltoall")

# Training: each rank its share of a fixed batch; the averaged gradients must give the
# same weights as one process on the whole batch.
torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
reference.load_state_dict(model.state_dict())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters())
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
x = torch.randn(8 * n, 16, device=device)
y = torch.randn(8 * n, 4, device=device)
for step in range(5):
    opt.zero_grad()
    mine = slice(8 * me, 8 * me + 8)
    torch.nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
    opt.step()
    ref_opt.zero_grad()
    torch.nn.functional.mse_loss(reference(x), y).backward()
    ref_opt.step()
for (name, p), q in zip(model.named_parameters(), reference.parameters()):
    expect(torch.allclose(p.detach().cpu(), q.detach().cpu(), atol=1e-5), f"training: {name} matches one process")

if device.type == "cuda":
    torch.cuda.synchronize()
hvd.shutdown()
print(f"rank {me}: kolo.torch on {device.type} tensors: {checks} checks, {len(failures)} failed")
for f in failures:
    print(f"  FAIL {f}")
sys.exit(1 if failures else 0)
