"""Elastic training with kolo.torch.elastic (Horovod's hvd.elastic): the CNN of mnist_like.py
on its synthetic data, committing every --commit-every batches, going on when workers die
or join:

    kolorun -np 4 --min-np 2 --max-np 4 /usr/bin/python3 examples/elastic_cnn.py

A step's global batch depends on its index only and a rank trains on its share of it (by
rank and size), so the averaged gradient is that of the whole batch on any number of
ranks: a run that loses a worker replays from its last commit on fewer ranks and follows
the same curve.

Rank 0 prints 'commit epoch=E batch=B size=S loss=L' at each commit (E, B: where training
resumes from it; L: the loss of the committed model on a fixed evaluation batch) and
'final loss=L size=S' at the end. After a rebuild every survivor prints 'rebuilt epoch=K
size=S rank=R worker=W seconds_since_failure=T at=U' (K: kolo's membership epoch; T: from
catching the error, or the interrupt that workers wait to join, to the end of the first
step on the new world; U: that moment, wall clock), and a worker that joined prints
'joined ...'. The worker that a test hook kills prints 'dying ... at=U' first.

Test hooks: ELASTIC_CNN_DIE_WORKER and ELASTIC_CNN_DIE_AT_BATCH: the worker that was that rank in
the first world SIGKILLs itself at the start of that global batch (its first life only:
workers that join have other ids). --stop-after/--save and --resume make the reference runs
of tests/python/elastic_test.py (one world up to a commit, then another from it).
"""
import argparse
import os
import time

import torch

import kolo.torch as hvd
from mnist_like import Data, Net, shard

p = argparse.ArgumentParser(description="elastic training on kolo")
p.add_argument("--batches-per-epoch", type=int, default=12)
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--commit-every", type=int, default=4, help="batches between commits")
p.add_argument("--global-batch", type=int, default=48, help="samples per step over all ranks (divisible by "
                                                           "every size the job may have)")
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--stop-after", type=int, help="stop after this many global batches (a commit point)")
p.add_argument("--save", help="with --stop-after: rank 0 saves the state there")
p.add_argument("--resume", help="start from a state --save wrote")
args = p.parse_args()

hvd.init()  # a worker that joins waits here until a rebuild lets it in
torch.set_num_threads(1)  # deterministic, and the ranks share the cores
torch.manual_seed(42)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
# One group: the gradients go as one fused allreduce of the same layout every step, so runs
# of the same sizes reduce alike, bit for bit (the runtime's own fusion depends on timing).
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), num_groups=1)
start = {"epoch": 0, "batch": 0}
if args.resume:
    saved = torch.load(args.resume)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    start = {"epoch": saved["epoch"], "batch": saved["batch"]}
state = hvd.elastic.TorchState(model, optimizer, **start)

data = Data(None)
evaluation = data.batch(10 ** 6, 256)  # a fixed batch no step trains on
total = args.epochs * args.batches_per_epoch
die_worker, die_at = os.environ.get("ELASTIC_CNN_DIE_WORKER"), os.environ.get("ELASTIC_CNN_DIE_AT_BATCH")
report = {"line": "joined" if hvd.elastic.epoch() > 0 else None}


def on_reset():
    report["line"] = "rebuilt"  # printed once the first step on the new world is done


state.register_reset_callbacks([on_reset])


def evaluate():
    with torch.no_grad():
        images, labels = evaluation
        return torch.nn.functional.cross_entropy(model(images), labels).item()


def step(g):
    if args.global_batch % hvd.size():
        raise ValueError(f"--global-batch {args.global_batch} does not split among {hvd.size()} ranks")
    images, labels = shard(data.batch(g, args.global_batch), hvd.rank(), hvd.size())
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(images), labels).backward()
    optimizer.step()


@hvd.elastic.run
def train(state):
    while state.epoch * args.batches_per_epoch + state.batch < total:
        g = state.epoch * args.batches_per_epoch + state.batch
        if die_worker is not None and hvd.elastic.worker_id() == die_worker and g == int(die_at):
            print(f"dying worker={die_worker} batch={g} at={time.time():.3f}", flush=True)
            os.kill(os.getpid(), 9)
        step(g)
        if report["line"]:
            since = (f" seconds_since_failure={time.monotonic() - state.interrupted_at:.2f}"
                     if state.interrupted_at is not None else "")
            print(f"{report['line']} epoch={hvd.elastic.epoch()} size={hvd.size()} rank={hvd.rank()} "
                  f"worker={hvd.elastic.worker_id()}{since} at={time.time():.3f}", flush=True)
            report["line"] = None
        state.epoch, state.batch = divmod(g + 1, args.batches_per_epoch)
        if (g + 1) % args.commit_every == 0 or g + 1 == total:
            state.save()  # state.commit(), with the line printed in between
            if hvd.rank() == 0:
                print(f"commit epoch={state.epoch} batch={state.batch} size={hvd.size()} loss={evaluate():.9g}",
                      flush=True)
            state.check_host_updates()
        if args.stop_after == g + 1:
            if args.save and hvd.rank() == 0:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": state.epoch, "batch": state.batch}, args.save)
            return


train(state)
if hvd.rank() == 0:
    print(f"final loss={evaluate():.9g} size={hvd.size()}", flush=True)
