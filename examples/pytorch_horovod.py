"""A Horovod training script on kolo: the only change from Horovod is the import.

    kolorun -np 4 /usr/bin/python3 examples/pytorch_horovod.py [--data mnist.pt]
"""
import torch

import kolo.torch as hvd  # was: import horovod.torch as hvd
from mnist_like import Data, Net, arguments, shard, write_losses

args = arguments("Horovod-style training on kolo")
hvd.init()
# One device per local rank (here CPU threads: share the cores among the local ranks).
torch.set_num_threads(max(1, torch.get_num_threads() // hvd.local_size()))
torch.manual_seed(42)
model = Net()
# The global batch is fixed, so its learning rate is too (Horovod scales the rate by the
# number of ranks when each rank keeps its own batch size).
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

data = Data(args.data)
losses = []
for step in range(args.steps):
    images, labels = shard(data.batch(step, args.global_batch), hvd.rank(), hvd.size())
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    mean = hvd.allreduce(loss.detach(), name="loss").item()  # the global batch's loss
    losses.append(mean)
    if hvd.rank() == 0 and step % 10 == 0:
        print(f"step {step}: loss {mean:.4f}", flush=True)
if hvd.rank() == 0:
    write_losses(args.losses, losses)
    if args.checkpoint:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, args.checkpoint)
    print(f"done: {args.steps} steps on {hvd.size()} ranks, final loss {losses[-1]:.4f}")
