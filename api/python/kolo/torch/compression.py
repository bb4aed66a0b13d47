"""Horovod's gradient compression: Compression.none, .fp16, and .bf16. Where kolo
compresses on the wire (allreduce of float32 sums and averages on a communicator within
one host), fp16/bf16 use it: each rank's tensor is encoded once and the sum runs in fp32
(kolo_wire, read by kolo.torch's allreduce and DistributedOptimizer). Elsewhere they cast
before the allreduce and back after, as Horovod does (the sum then runs in the 16-bit
type)."""
import torch

from kolo import _capi


class Compressor:
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    pass


class _CastCompressor(Compressor):
    wire = None
    kolo_wire = None

    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != cls.wire:
            return tensor.to(cls.wire), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class FP16Compressor(_CastCompressor):
    wire = torch.float16
    kolo_wire = _capi.FLOAT16


class BF16Compressor(_CastCompressor):
    wire = torch.bfloat16
    kolo_wire = _capi.BFLOAT16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
