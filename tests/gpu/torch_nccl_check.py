"""PyTorch's own "nccl" backend, unchanged, on kolo's libnccl.so.2, for tools/gpu-check.sh:
`kolorun --nccl -np 2 python3 tests/gpu/torch_nccl_check.py` (2 ranks on one GPU, which
NVIDIA's NCCL refuses). torch.distributed's collectives on CUDA tensors checked against
what each rank's known inputs give; then DistributedDataParallel training a small CNN for
some steps, whose loss and weights must equal one process doing DDP's arithmetic alone.

kolorun gives KOLO_RANK/KOLO_SIZE; torch's env:// wants RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT (MASTER_PORT from the caller: `kolorun -x MASTER_PORT=...`). --backend gloo
runs the same on CPU tensors (how the script itself is tested where there is no GPU).
Exits non-zero with the failures listed."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args()

os.environ.setdefault("RANK", os.environ.get("KOLO_RANK", "0"))
os.environ.setdefault("WORLD_SIZE", os.environ.get("KOLO_SIZE", "1"))
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")
me, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
device = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)
    # Two ranks on one GPU: tell torch which device, so that it makes the communicator eagerly.
    dist.init_process_group(args.backend, device_id=device)
else:
    dist.init_process_group(args.backend)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from kolo_checks import expect, finish  # noqa: E402 - after the path it lives on


def values(rank, count, dtype):
    return (torch.arange(count, dtype=torch.float64) % 5 + 1 + rank).to(dtype).to(device)


dtypes = (torch.float32, torch.float16, torch.bfloat16, torch.int64) if args.backend == "nccl" else (torch.float32, torch.int64)
for dtype in dtypes:
    for count in (1, 1000, (1 << 20) + 3):
        t = values(me, count, dtype)
        dist.all_reduce(t)
        want = sum(values(r, count, torch.float64) for r in range(n))
        expect(torch.equal(t.to(torch.float64), want), f"all_reduce sum {dtype} {count}")
t = values(me, 999, torch.float32)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
expect(torch.equal(t, values(n - 1, 999, torch.float32)), "all_reduce max")
if args.backend == "nccl":  # gloo has no AVG
    t = values(me, 999, torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    want = sum(values(r, 999, torch.float64) for r in range(n)) / n
    expect(torch.allclose(t.to(torch.float64), want), "all_reduce avg")

out = [torch.empty(1001, device=device) for _ in range(n)]
dist.all_gather(out, values(me, 1001, torch.float32))
expect(all(torch.equal(out[r], values(r, 1001, torch.float32)) for r in range(n)), "all_gather")
if args.backend == "nccl":  # gloo has no _allgather_base
    flat = torch.empty(n * 1001, device=device)
    dist.all_gather_into_tensor(flat, values(me, 1001, torch.float32))
    expect(torch.equal(flat, torch.cat([values(r, 1001, torch.float32) for r in range(n)])), "all_gather_into_tensor")
t = values(me, 4097, torch.float32)
dist.broadcast(t, src=n - 1)
expect(torch.equal(t, values(n - 1, 4097, torch.float32)), "broadcast from the last rank")
if args.backend == "nccl":  # reduce_scatter_tensor and uneven all_to_all_single are NCCL's
    rs = torch.empty(777, device=device)
    dist.reduce_scatter_tensor(rs, torch.cat([values(me + r, 777, torch.float32) for r in range(n)]))
    want = sum(values(r + me, 777, torch.float64) for r in range(n))
    expect(torch.equal(rs.to(torch.float64), want), "reduce_scatter_tensor")
    # all_to_all_single with uneven splits: rank r sends r + q + 1 values to rank q.
    send = torch.cat([torch.full((me + q + 1,), float(me * 100 + q), device=device) for q in range(n)])
    recv = torch.empty(sum(q + me + 1 for q in range(n)), device=device)
    dist.all_to_all_single(recv, send, output_split_sizes=[q + me + 1 for q in range(n)],
                           input_split_sizes=[me + q + 1 for q in range(n)])
    want = torch.cat([torch.full((q + me + 1,), float(q * 100 + me), device=device) for q in range(n)])
    expect(torch.equal(recv, want), "all_to_all_single with uneven splits")
if n > 1 and args.backend == "nccl":  # gloo's batch_isend_irecv differs
    ops = [dist.P2POp(dist.isend, values(me, 333, torch.float32), (me + 1) % n),
           dist.P2POp(dist.irecv, torch.empty(333, device=device), (me - 1) % n)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    expect(torch.equal(ops[1].tensor, values((me - 1) % n, 333, torch.float32)), "batch_isend_irecv around the ring")
dist.barrier()
if n > 1:
    sub = dist.new_group(ranks=list(range(n - 1)))  # the last rank left out (NCCL_SPLIT_NOCOLOR)
    if me < n - 1:
        t = values(me, 100, torch.float32)
        dist.all_reduce(t, group=sub)
        expect(torch.equal(t.to(torch.float64), sum(values(r, 100, torch.float64) for r in range(n - 1))),
               "all_reduce on new_group")

# DDP: each rank trains on its part of a fixed batch; DDP averages the gradients. The
# reference is one process doing DDP's arithmetic alone: each part's gradient computed as
# a rank computes it, then their mean, so the two differ only by the allreduce's rounding
# (on a GPU, one process on the whole batch would run other cuDNN algorithms and round
# differently: 1.7e-5 apart after 20 steps on an H200). TF32 is off for the same reason.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.deterministic = True
torch.manual_seed(0)


def model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).to(device)


gen = torch.Generator().manual_seed(2)
images = torch.randn(8 * n, 1, 16, 16, generator=gen).to(device)
labels = torch.randint(0, 10, (8 * n,), generator=gen).to(device)
ddp = nn.parallel.DistributedDataParallel(model(), device_ids=[0] if device.type == "cuda" else None)
alone = model()
opt_ddp = torch.optim.SGD(ddp.parameters(), lr=0.1)
opt_alone = torch.optim.SGD(alone.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
part = [slice(8 * r, 8 * (r + 1)) for r in range(n)]
worst = 0.0
for step in range(args.steps):
    opt_ddp.zero_grad()
    loss = loss_fn(ddp(images[part[me]]), labels[part[me]])
    loss.backward()
    opt_ddp.step()
    opt_alone.zero_grad()
    grads = []
    whole = 0.0
    for r in range(n):
        alone.zero_grad()
        piece = loss_fn(alone(images[part[r]]), labels[part[r]])
        piece.backward()
        grads.append([p.grad.clone() for p in alone.parameters()])
        whole += piece.item() / n
    for i, p in enumerate(alone.parameters()):
        p.grad = sum(g[i] for g in grads) / n
    opt_alone.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    mean /= n
    worst = max(worst, abs(mean.item() - whole))
expect(worst < 1e-4, f"DDP loss equals one process's on the whole batch (worst difference {worst:.2e})")
flat = torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])
first = flat.clone()
dist.broadcast(first, 0)
expect(torch.equal(flat, first), f"DDP weights the same on every rank (largest difference {(flat - first).abs().max().item():.2e})")
apart = max((a - b).abs().max().item() for a, b in zip(ddp.module.parameters(), alone.parameters()))
expect(all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ddp.module.parameters(), alone.parameters())),
       f"DDP weights equal one process's after training (largest difference {apart:.2e})")
dist.destroy_process_group()
print(f"rank {me}: DDP loss after {args.steps} steps {whole:.4f} (worst difference {worst:.1e})")
finish(f"rank {me}: torch {torch.__version__}, backend {args.backend}")
