"""Training throughput on CPU, side by side in one run under kolorun (2 ranks by default):
kolo.torch's DistributedOptimizer (Horovod's API), DDP on kolo's backend, and DDP on
torch's Gloo backend, for the examples' CNN and for two communication-heavy models with
67 MB of gradients: a wide MLP and a DLRM-like recommender (an embedding table with dense
gradients). Prints steps per second and the ratios to Gloo (rank 0), each model's step
without communication (one rank's compute alone, the ceiling of any ratio), and the cost
of kolo.torch's Python layer per allreduce over the C runtime's.

    kolorun -np 2 /usr/bin/python3 bench/python/torch_throughput.py [--steps 20]
"""
import argparse
import ctypes
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import kolo.torch as hvd  # noqa: E402
import kolo.torch.distributed  # noqa: E402,F401
from kolo import _capi  # noqa: E402
from mnist_like import Net  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=3)
args = p.parse_args()

hvd.init()
rank, size = hvd.rank(), hvd.size()
torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
job = os.environ["KOLO_ADDR"].replace(":", "-").replace("/", "-")
dist.init_process_group("gloo", init_method=f"file://{tempfile.gettempdir()}/kolo-bench-{job}", rank=rank,
                        world_size=size)
kolo_group = dist.new_group(backend="kolo")


def wide_mlp():
    return torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 16))


class Recommender(torch.nn.Module):
    """DLRM-like: a 67 MB embedding table with dense gradients (torch's default) and a small
    MLP. Its step is mostly the gradient's allreduce, as in recommendation models, where
    the wide MLP's step is mostly torch's single-threaded matrix products."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.EmbeddingBag(262144, 64, mode="sum")
        self.mlp = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))

    def forward(self, x):
        return self.mlp(self.table(x))


MODELS = {"cnn (examples/, batch 32 per rank)": (Net, lambda: (torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,)))),
          "wide MLP (67 MB of gradients, batch 1)": (wide_mlp, lambda: (torch.randn(1, 4096), torch.randint(0, 16, (1,)))),
          "recommender (67 MB embedding, batch 32)": (Recommender, lambda: (torch.randint(0, 262144, (32, 8)),
                                                                           torch.randint(0, 16, (32,))))}


COMPUTE_ONLY = "no allreduce (compute alone)"


def run(make_model, batch, mode):
    torch.manual_seed(0)
    model = make_model()
    if mode == "kolo.torch (Horovod API)":
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                       named_parameters=model.named_parameters())
        net = model
    elif mode == COMPUTE_ONLY:  # every rank steps alone, at the same time: the ceiling
        net, opt = model, torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        net = torch.nn.parallel.DistributedDataParallel(model, process_group=kolo_group if "kolo" in mode else None)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = batch()
    times = []
    for step in range(args.warmup + args.steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    return len(times) / sum(times), times[len(times) // 2]


results = {}
for name, (make, batch) in MODELS.items():
    for mode in ["DDP, Gloo backend", "DDP, kolo backend", "kolo.torch (Horovod API)", COMPUTE_ONLY]:
        results[(name, mode)] = run(make, batch, mode)

# The Python layer's cost: allreduce of a small tensor through kolo.torch vs the runtime's C
# call (both named, through the same background thread).
t = torch.ones(256)
n = 300
start = time.perf_counter()
for i in range(n):
    hvd.allreduce_(t, name="overhead.py", op=hvd.Sum)
py_us = (time.perf_counter() - start) / n * 1e6
opts = _capi.enqueue_options()
start = time.perf_counter()
for i in range(n):
    req = ctypes.c_void_p()
    _capi.check(_capi.lib.kolo_enqueue_allreduce(b"overhead.c", ctypes.c_void_p(t.data_ptr()), ctypes.c_void_p(t.data_ptr()),
                                                 256, _capi.FLOAT32, _capi.OP_SUM, ctypes.byref(opts), hvd._state.comm,
                                                 ctypes.byref(req)))
    _capi.check(_capi.lib.kolo_wait(req))
    _capi.lib.kolo_request_free(req)
c_us = (time.perf_counter() - start) / n * 1e6

if rank == 0:
    print(f"# {size} ranks, {torch.get_num_threads()} torch threads each, torch {torch.__version__}")
    print(f"{'model':42s} {'mode':28s} {'steps/s':>8s} {'median ms':>10s} {'vs Gloo':>8s}")
    for (name, mode), (rate, median) in results.items():
        base = results[(name, "DDP, Gloo backend")][0]
        print(f"{name:42s} {mode:28s} {rate:8.2f} {median * 1e3:10.2f} {rate / base:7.2f}x")
    print(f"allreduce of 1 KB through the runtime: kolo.torch {py_us:.1f} us, the C API from Python (ctypes) "
          f"{c_us:.1f} us: the Python layer adds {py_us - c_us:.1f} us")
dist.destroy_process_group()
