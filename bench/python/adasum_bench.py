"""Adasum against a plain sum, both through kolo.torch's allreduce on float32 CPU tensors:
the median time of each per size, alternating, and their ratio.
  kolorun -np N /usr/bin/python3 bench/python/adasum_bench.py [sizes in MB ...]"""
import statistics
import sys
import time

import torch

import kolo.torch as hvd

hvd.init()
sizes_mb = [float(a) for a in sys.argv[1:]] or [0.004, 0.25, 4, 64]
if hvd.rank() == 0:
    print(f"# {hvd.size()} ranks; median of 10 calls after 3 warm-up; ms")
    print(f"{'MB':>8} {'sum':>9} {'adasum':>9} {'adasum/sum':>11}")
for mb in sizes_mb:
    x = torch.randn(max(1, int(mb * (1 << 20)) // 4))
    times = {hvd.Sum: [], hvd.Adasum: []}
    for i in range(13):
        for op in (hvd.Sum, hvd.Adasum):
            hvd.barrier()
            t = time.perf_counter()
            hvd.allreduce(x, op=op, name=f"{op}.{mb}.{i}")
            if i >= 3:
                times[op].append((time.perf_counter() - t) * 1e3)
    s, a = statistics.median(times[hvd.Sum]), statistics.median(times[hvd.Adasum])
    if hvd.rank() == 0:
        print(f"{mb:8.3f} {s:9.3f} {a:9.3f} {a / s:11.2f}")
