"""hvd.elastic.ElasticSampler: a sampler whose epoch goes on where a failure left it, split
among however many ranks the world has after a rebuild."""
import math
import random

import torch.utils.data

from kolo import _capi
from kolo.torch import _state


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler. The epoch's indices are shuffled alike on every rank (seed +
    epoch); `processed_num` counts the samples the whole world has taken from the front of
    that order (record_batch adds batch_size x ranks), so that after a rebuild the rest is
    dealt again among the ranks there are now. Kept in a TorchState (state.sampler), it is
    saved at commit, restored after a failure and synced from rank 0 after a rebuild.
    Call set_epoch at the end of an epoch (it starts the next one from its beginning)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Every rank has processed one more batch of batch_size samples."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]
        self.processed_num = state["processed_num"]
        self.reset()

    def reset(self):
        """Deals what is left of the epoch among the ranks of the world as it is now."""
        world = _state.require()
        self.num_replicas, self.rank = _capi.lib.kolo_comm_size(world), _capi.lib.kolo_comm_rank(world)
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)

    def __iter__(self):
        total = self.num_samples * self.num_replicas
        indices = self.remaining_indices[:]
        indices += indices[:total - len(indices)]  # every rank as many (the first ones again)
        return iter(indices[self.rank:total:self.num_replicas])

    def __len__(self):
        return self.num_samples
