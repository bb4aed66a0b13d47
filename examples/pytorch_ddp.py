"""The same model with DistributedDataParallel on kolo's torch.distributed backend.

    kolorun -np 4 /usr/bin/python3 examples/pytorch_ddp.py [--data mnist.pt]
    mpirun -np 4 /usr/bin/python3 examples/pytorch_ddp.py
    torchrun --nproc_per_node 4 examples/pytorch_ddp.py

kolo.torch.distributed.init_process_group() takes the rank and size from whichever launcher
started the script, and has the ranks meet through env:// where MASTER_ADDR and MASTER_PORT
are set (torchrun), else through a store file in a private folder (ranks on one host).
"""
import torch
import torch.distributed as dist

import kolo.torch.distributed  # registers the "kolo" backend
from mnist_like import Data, Net, arguments, shard, write_losses

args = arguments("DDP training on the kolo backend")
launch = kolo.torch.distributed.init_process_group("kolo")  # = dist.init_process_group("kolo", rank=, world_size=, ...)
rank, size = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(max(1, torch.get_num_threads() // (launch.local_size or size)))
torch.manual_seed(42)
model = torch.nn.parallel.DistributedDataParallel(Net())  # broadcasts rank 0's parameters
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

data = Data(args.data)
losses = []
for step in range(args.steps):
    images, labels = shard(data.batch(step, args.global_batch), rank, size)
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    losses.append(mean.item() / size)
    if rank == 0 and step % 10 == 0:
        print(f"step {step}: loss {losses[-1]:.4f}", flush=True)
if rank == 0:
    write_losses(args.losses, losses)
    if args.checkpoint:
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}, args.checkpoint)
    print(f"done: {args.steps} steps on {size} ranks, final loss {losses[-1]:.4f}")
dist.barrier()
dist.destroy_process_group()
