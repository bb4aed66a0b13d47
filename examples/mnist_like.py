"""What both PyTorch examples share: an MNIST-sized CNN, its data (synthetic by default, or
tensors from a file), and the command line. Each step's global batch is the same on every
rank count; a rank trains on its share of it, so runs on 1, 2 or 4 ranks follow the same
loss curve (the per-rank batch times the number of ranks is the global batch)."""
import argparse
import json

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 5)
        self.conv2 = torch.nn.Conv2d(16, 32, 5)
        self.fc1 = torch.nn.Linear(32 * 4 * 4, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def arguments(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--global-batch", type=int, default=64, help="samples per step, over all ranks")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate of the global batch")
    p.add_argument("--data", help="a .pt file holding (images [N,1,28,28] float, labels [N] int64); "
                                   "synthetic data when absent")
    p.add_argument("--checkpoint", help="rank 0 saves the model and optimizer here at the end")
    p.add_argument("--losses", help="rank 0 writes the loss of every step here (JSON)")
    return p.parse_args()


class Data:
    def __init__(self, path):
        self.images = self.labels = None
        if path:
            self.images, self.labels = torch.load(path)

    def batch(self, step, size):
        """The global batch of `step`: the same on every rank."""
        if self.images is None:
            # Learnable: each class is a fixed random pattern, an image its class's pattern
            # under noise, so the loss falls as the model learns the patterns.
            g = torch.Generator().manual_seed(1000 + step)
            labels = torch.randint(0, 10, (size,), generator=g)
            images = _patterns()[labels] + 1.5 * torch.randn(size, 1, 28, 28, generator=g)
            return images, labels
        at = (step * size) % len(self.images)
        idx = torch.arange(at, at + size) % len(self.images)
        return self.images[idx], self.labels[idx]


def _patterns():
    return torch.randn(10, 1, 28, 28, generator=torch.Generator().manual_seed(0))


def shard(batch, rank, size):
    images, labels = batch
    return images.chunk(size)[rank], labels.chunk(size)[rank]


def write_losses(path, losses):
    if path:
        with open(path, "w") as f:
            json.dump(losses, f)
