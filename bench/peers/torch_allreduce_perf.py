"""torch.distributed's all_reduce on the Gloo backend (CPU tensors), measured and printed the
way kolo-perf prints (nccl-tests columns), as a peer beside kolo, Open MPI, MPICH and
Gloo's own C++ benchmark. float32 sum. One process per rank, started by kolorun (ranks from
KOLO_RANK / KOLO_SIZE; they meet in a torch FileStore under -d, or a file named after the
job's KOLO_ADDR in the temp directory) or by torchrun (RANK / WORLD_SIZE / MASTER_ADDR /
MASTER_PORT):

    kolorun -np 2 /usr/bin/python3 bench/peers/torch_allreduce_perf.py [-b 8] [-e 256M] [-f 2]
        [-n 20] [-w 1] [-c 0|1] [-d DIR] [--latency]

torch.distributed's all_reduce is in place. In-place columns: all_reduce(recv). Out-of-place
columns: recv.copy_(send) then all_reduce(recv), which is what an out-of-place allreduce
costs a torch user (Gloo's own allreduce copies its input into its output likewise). Time
per call is the ranks' average; busbw = algbw * 2(p-1)/p. One torch thread per rank.
--latency: as kolo-perf's (each out-of-place call timed alone; min / median / p99 by nearest
rank of every rank's calls pooled, in us) — here including Python's cost per call, which is
what a torch user pays.
"""
import argparse
import math
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if scale != 1 else text) * scale)


p = argparse.ArgumentParser(description="torch.distributed all_reduce (gloo) in kolo-perf's columns")
p.add_argument("-b", type=parse_size, default=8)
p.add_argument("-e", type=parse_size, default=256 << 20)
p.add_argument("-f", type=float, default=2)
p.add_argument("-n", type=int, default=20)
p.add_argument("-w", type=int, default=1)
p.add_argument("-c", type=int, default=1)
p.add_argument("-d", default="", help="an empty directory shared by the ranks, for the FileStore")
p.add_argument("--latency", action="store_true")
args = p.parse_args()
if args.f <= 1 or args.n < 1 or args.e < args.b:
    p.error("bad -f, -n, -b or -e")

torch.set_num_threads(1)
if "KOLO_RANK" in os.environ:
    rank, size = int(os.environ["KOLO_RANK"]), int(os.environ["KOLO_SIZE"])
    if args.d:
        store = os.path.join(args.d, "torch-store")
    else:
        job = os.environ.get("KOLO_ADDR", "local").replace(":", "-").replace("/", "-")
        store = os.path.join(tempfile.gettempdir(), f"kolo-torch-perf-{job}")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=size)
else:  # torchrun: env:// rendezvous
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()


def input_values(count, r):
    """Rank r's inputs: (i + 2r) % 5, as the other peers' (peer_bench_common.h)."""
    return ((torch.arange(count, dtype=torch.int64) + 2 * r) % 5).to(torch.float32)


def timed(send, recv, in_place, iters, warmup, latency):
    """Average us per call over the ranks, and (latency) min / p50 / p99 of all ranks' calls."""
    def call():
        if not in_place:
            recv.copy_(send)
        dist.all_reduce(recv)

    for _ in range(warmup):
        call()
    dist.barrier()
    clock = time.perf_counter
    stamps = [0.0] * (iters + 1) if latency else None
    start = clock()
    if latency:
        stamps[0] = start
        for i in range(iters):
            call()
            stamps[i + 1] = clock()
    else:
        for _ in range(iters):
            call()
    mine = torch.tensor([(clock() - start) / iters * 1e6], dtype=torch.float64)
    dist.all_reduce(mine)
    lat = None
    if latency:
        per_call = torch.tensor([(stamps[i + 1] - stamps[i]) * 1e6 for i in range(iters)], dtype=torch.float64)
        pooled = [torch.empty_like(per_call) for _ in range(size)]
        dist.all_gather(pooled, per_call)
        ordered = sorted(torch.cat(pooled).tolist())

        def at(q):
            return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
        lat = (ordered[0], at(0.50), at(0.99))
    return mine.item() / size, lat


def time_text(us):
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def lat_text(us):
    return f"{us:8.0f}" if us >= 10000 else f"{us:8.1f}" if us >= 100 else f"{us:8.2f}"


if rank == 0:
    print(f"# torch_allreduce_perf allreduce (torch {torch.__version__} torch.distributed, gloo backend, float sum), "
          f"{size} ranks, iters {args.n} warmup {args.w}")
    print("# out-of-place: recv.copy_(send) then all_reduce(recv); in-place: all_reduce(recv)")
    if args.latency:
        print("# latency: each out-of-place call timed alone (time.perf_counter, from Python); min, median and p99 "
              f"(nearest rank) of every rank's {args.n} calls pooled, in us")
    print("#%94s%35s" % ("out-of-place", "in-place"))
    print("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s" % (
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
        "#wrong", "   lat_min   lat_p50   lat_p99" if args.latency else ""))
    sys.stdout.flush()

bus = 2.0 * (size - 1) / size if size > 1 else 1.0
total_wrong = 0
last_count = None
nbytes = args.b
while nbytes <= args.e:
    count = nbytes // 4
    if count != last_count:
        last_count = count
        send = input_values(count, rank)
        expected = sum(input_values(count, r) for r in range(size)) if args.c else None
        cols = []
        lat = None
        for in_place in (False, True):
            recv = send.clone() if in_place else torch.full((count,), -1.0)
            us, l = timed(send, recv, in_place, args.n, args.w, args.latency and not in_place)
            lat = lat or l
            wrong = torch.zeros(1, dtype=torch.int64)
            if args.c:
                recv = send.clone() if in_place else torch.full((count,), -1.0)
                if not in_place:
                    recv.copy_(send)
                dist.all_reduce(recv)
                wrong[0] = int((recv != expected).sum())
            dist.all_reduce(wrong)
            total_wrong += int(wrong[0])
            algbw = count * 4 / us / 1e3 if us > 0 else 0.0
            cols.append("  %7s  %6.2f  %6.2f  %6s" % (time_text(us), algbw, algbw * bus,
                                                       str(int(wrong[0])) if args.c else "N/A"))
        if rank == 0:
            extra = "  " + "  ".join(lat_text(x) for x in lat) if lat else ""
            print(" %12d  %12d  %8s  %6s  %6d%s%s" % (count * 4, count, "float", "sum", -1, "".join(cols), extra))
            sys.stdout.flush()
    nxt = int(nbytes * args.f)
    if nxt <= nbytes:
        break
    nbytes = nxt

if rank == 0:
    print("# Out of bounds values : %d %s" % (total_wrong, "OK" if total_wrong == 0 else "FAILED"))
    sys.stdout.flush()
dist.destroy_process_group()
sys.exit(0 if total_wrong == 0 else 1)
