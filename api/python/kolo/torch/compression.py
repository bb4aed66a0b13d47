"""Horovod's gradient compression: Compression.none, .fp16, and .bf16. kolo's runtime does
not compress on the wire yet, so fp16/bf16 cast before the allreduce and back after, as
Horovod does (the sum then runs in the 16-bit type: kolo's own wire compression, which
accumulates in fp32, runs on device buffers of one host through kolo_allreduce_ex)."""
import torch


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


class BF16Compressor(_CastCompressor):
    wire = torch.bfloat16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
