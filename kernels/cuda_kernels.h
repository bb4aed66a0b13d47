// CUDA twins of kernels/host_kernels.h, compiled only when nvcc is found (KOLO_HAVE_CUDA).
// This header includes no CUDA header, so any layer may include it: streams travel as
// void* (a cudaStream_t; nullptr is the legacy default stream), pointers are device (or
// managed / mapped host) memory. Calls are asynchronous on the stream, as a kernel launch
// is; the returned Status covers argument errors and launch errors only.
#pragma once

#include <cstddef>

#include "kernels/compress.h"
#include "kernels/dtype.h"
#include "kernels/host_kernels.h"
#include "support/status.h"

namespace kolo {

// Same contract and the same arithmetic (kernels/functors.h) as reduce_into on the host,
// so the two give bit-identical results for the same inputs.
Status cuda_reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count,
                        DType dtype, ReduceOp op, Scale scale, void* stream);

// Same contract as scale_copy on the host.
Status cuda_scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale,
                       void* stream);

// The cuda backend's Launch::cuda for the reduce body (kernels/reduce_body.h): args is a
// ReduceArgs; launches reduce_kernel<dtype, op> on the stream. The two calls above are
// device_reduce_into / device_scale_copy (kernels/device_kernels.h) on the cuda backend.
Status cuda_reduce_launch(const void* args, unsigned grid, unsigned block, void* stream);
// The same for the one-host step barrier (kernels/barrier_body.h): args is a BarrierArgs.
Status cuda_barrier_launch(const void* args, unsigned grid, unsigned block, void* stream);
// The same for the one-kernel allreduce (kernels/flagged_body.h): args is a FlaggedArgs.
Status cuda_flagged_launch(const void* args, unsigned grid, unsigned block, void* stream);

// Load every kernel of each file on the current device now. CUDA loads a kernel at its
// first launch by default (lazy loading), and loading may wait for the kernels running on
// the device: a barrier kernel spinning for a peer whose next launch is the first of its
// kind then waits out its deadline. device_preload_kernels calls them all.
Status cuda_reduce_preload();
Status cuda_barrier_preload();
Status cuda_codec_preload();
Status cuda_flagged_preload();

// Wire compression (kernels/compress.h): same contracts, layout and arithmetic
// (kernels/compress_math.h) as compress, decompress, decompress_reduce and
// decompress_reduce_compress on the host, bit for bit. Pointers 16-byte aligned take the
// vector path; any other alignment (to the element size) works, slower.
Status cuda_compress(void* wire, const float* src, size_t count, WireFormat fmt, Scale scale,
                     void* stream);
Status cuda_decompress(float* dst, const void* wire, size_t count, WireFormat fmt, Scale scale,
                       void* stream);
Status cuda_decompress_reduce(float* acc, const void* wire, size_t count, WireFormat fmt,
                              Scale scale, void* stream);
Status cuda_decompress_reduce_compress(void* wire_out, const float* acc, const void* wire_in,
                                       size_t count, WireFormat fmt, Scale scale,
                                       void* stream);

Status cuda_decompress_sum(float* dst, const void* const* wires, int nwires, size_t count,
                           WireFormat fmt, Scale scale, void* stream);
Status cuda_recompress_sum(void* wire_out, const void* const* wires, int nwires, size_t count,
                           WireFormat fmt, Scale scale, void* stream);

}  // namespace kolo
