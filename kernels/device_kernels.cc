// Device launches of the reduce / scale-copy body (kernels/reduce_body.h): checks, the
// work split, and one device::Launch that carries both the emulated block loop (compiled
// here, in every build) and, in CUDA builds, the .cu wrapper's launcher.
#include "kernels/device_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>

#include "kernels/compress.h"
#include "kernels/compress_math.h"
#include "kernels/flagged_body.h"
#include "kernels/host_kernels.h"
#include "kernels/reduce_body.h"
#if defined(KOLO_KERNELS_HAVE_CUDA)
#include "kernels/cuda_kernels.h"
#endif

namespace kolo {
namespace {

// One block of the emulated grid: its threads one after another, with the indices the
// CUDA wrapper computes from blockIdx and threadIdx.
template <DType D, ReduceOp O>
struct EmulatedBlock {
  static void run(const ReduceArgs& a, unsigned block_index, unsigned grid, unsigned block) {
    const size_t nthreads = static_cast<size_t>(grid) * block;
    const size_t first = static_cast<size_t>(block_index) * block;
    for (unsigned t = 0; t < block; ++t) reduce_thread<D, O>(a, first + t, nthreads);
  }
};

void emulated_reduce_block(const void* args, unsigned block_index, unsigned grid, unsigned block) {
  ReduceArgs a;
  std::memcpy(&a, args, sizeof(a));  // Launch::args are bytes; copy out, aligned
  if (a.skip_if != nullptr && __atomic_load_n(a.skip_if, __ATOMIC_ACQUIRE) != 0) return;
  dispatch_reduce<EmulatedBlock>(a.dtype, a.op, a, block_index, grid, block);
}

thread_local const uint32_t* t_kernel_guard = nullptr;

void emulated_barrier_block(const void* args, unsigned, unsigned, unsigned) {
  BarrierArgs a;
  std::memcpy(&a, args, sizeof(a));
  barrier_thread(a, 0);
}

// The one-kernel allreduce on the emulated device: the whole grid in the first block's
// call, every thread's writes, then every thread's reads (an order a GPU may take too),
// so that a rank waits for a peer once per call, not once per thread.
template <DType D, ReduceOp O>
struct EmulatedFlagged {
  static void run(const FlaggedArgs& a, size_t nthreads) {
    const uint32_t seq = __atomic_load_n(a.sequence, __ATOMIC_ACQUIRE) + 1;
    if (barrier_status(a.failed) == 0) {
      for (size_t t = 0; t < nthreads; ++t) flagged_write<D, O>(a, seq, t, nthreads);
      for (size_t t = 0; t < nthreads; ++t) flagged_read<D, O>(a, seq, t, nthreads);
    }
    __atomic_store_n(a.sequence, seq, __ATOMIC_RELEASE);
  }
};

void emulated_flagged_block(const void* args, unsigned block_index, unsigned grid, unsigned block) {
  if (block_index != 0) return;
  FlaggedArgs a;
  std::memcpy(static_cast<void*>(&a), args, sizeof(a));
  dispatch_reduce<EmulatedFlagged>(a.dtype, a.op, a, static_cast<size_t>(grid) * block);
}

ReduceScaleArgs scale_args(DType dtype, Scale scale) {
  ReduceScaleArgs s;
  s.factor = scale.factor;
  s.divisor = scale.divisor;
  s.md = scale.factor / static_cast<double>(scale.divisor);
  s.mf = static_cast<float>(s.md);
  if (scale.identity()) {
    s.mode = ReduceScaleArgs::kIdentity;
  } else if (dtype_is_float(dtype)) {
    s.mode = ReduceScaleArgs::kMul;
  } else {
    s.mode = scale.factor == 1.0 ? ReduceScaleArgs::kIntDiv : ReduceScaleArgs::kIntDouble;
  }
  return s;
}

// One launch of a body on the runtime's device; errors name the caller. A cuda runtime
// needs the .cu wrapper, which builds without nvcc lack.
Status launch_on(const device::DeviceOps& dev, const device::Launch& l, void* stream, const char* caller) {
  if (dev.kind.gpu && l.cuda == nullptr) {
    return error(Code::kUnsupported, caller, ": this kolo was built without the CUDA kernels");
  }
  Status st = dev.launch(l, stream);
  if (!st.ok()) return error(st.code(), caller, ": ", st.message());
  return st;
}

Status launch_reduce(const device::DeviceOps& dev, const char* caller, void* dst,
                     const void* const* srcs, int nsrcs, size_t count, DType dtype, ReduceOp op,
                     Scale scale, void* stream, unsigned max_blocks) {
  KOLO_TRY(check_reduce_args(caller, dst, srcs, nsrcs, count, dtype, op, scale));
  if (max_blocks == 0) return error(Code::kInvalidArgument, caller, ": max_blocks is 0");
  if (!dev.kind.runs_kernels) {
    return error(Code::kUnsupported, caller, ": no device runtime (backend '", dev.name,
                 "'); set KOLO_DEVICE=emulated for a CPU device, or use the host kernels");
  }
  if (count == 0) return Status::ok_status();
  // One input and no scale: the result is the input, bit for bit, whatever the op; a plain
  // copy, unless a guard must be able to skip it (ScopedKernelGuard).
  if (nsrcs == 1 && scale.identity() && t_kernel_guard == nullptr) {
    if (dst == srcs[0]) return Status::ok_status();
    return dev.memcpy_async(dst, srcs[0], count * dtype_size(dtype), stream);
  }
  const ReducePlan plan = plan_reduce(dst, srcs, nsrcs, count, dtype, max_blocks);
  ReduceArgs a;
  a.dst = dst;
  for (int k = 0; k < nsrcs; ++k) a.src[k] = srcs[k];
  a.nsrcs = nsrcs;
  a.dtype = dtype;
  a.op = op;
  a.count = count;
  a.head = plan.head;
  a.npacks = plan.npacks;
  a.scale = scale_args(dtype, scale);
  a.skip_if = t_kernel_guard;

  device::Launch l;
  l.grid = plan.grid;
  l.block = kKernelThreads;
  l.args = &a;
  l.args_bytes = sizeof(a);
  l.emulated = emulated_reduce_block;
#if defined(KOLO_KERNELS_HAVE_CUDA)
  l.cuda = cuda_reduce_launch;
#endif
  return launch_on(dev, l, stream, caller);
}

// One codec launch, plain bytes (Launch::args).
struct CodecLaunch {
  CodecOp op = CodecOp::kCompress;  // kCompress, kDecompress (a sum) or kRecompress (a sum)
  float* fout = nullptr;
  const float* fin = nullptr;
  void* wout = nullptr;
  const void* win[kMaxWireInputs] = {};
  int nwin = 0;
  size_t count = 0;
  WireFormat fmt;
  Scale scale;
};

// The host twins; arguments were checked at enqueue, so they cannot fail here.
Status run_codec_on_host(const CodecLaunch& c) {
  switch (c.op) {
    case CodecOp::kCompress: return compress(c.wout, c.fin, c.count, c.fmt, c.scale);
    case CodecOp::kDecompress: return decompress_sum(c.fout, c.win, c.nwin, c.count, c.fmt, c.scale);
    default: return recompress_sum(c.wout, c.win, c.nwin, c.count, c.fmt, c.scale);
  }
}

void emulated_codec_block(const void* args, unsigned, unsigned, unsigned) {
  CodecLaunch c;
  std::memcpy(static_cast<void*>(&c), args, sizeof(c));
  (void)run_codec_on_host(c);
}

#if defined(KOLO_KERNELS_HAVE_CUDA)
Status cuda_codec_launch(const void* args, unsigned, unsigned, void* stream) {
  CodecLaunch c;
  std::memcpy(static_cast<void*>(&c), args, sizeof(c));
  switch (c.op) {
    case CodecOp::kCompress: return cuda_compress(c.wout, c.fin, c.count, c.fmt, c.scale, stream);
    case CodecOp::kDecompress: return cuda_decompress_sum(c.fout, c.win, c.nwin, c.count, c.fmt, c.scale, stream);
    default: return cuda_recompress_sum(c.wout, c.win, c.nwin, c.count, c.fmt, c.scale, stream);
  }
}
#endif

Status launch_codec(const device::DeviceOps& dev, const char* caller, const CodecLaunch& c, void* stream) {
  if (c.op != CodecOp::kCompress && c.nwin < 1) {
    return error(Code::kInvalidArgument, caller, ": ", c.nwin, " wire inputs (1..", kMaxWireInputs, ")");
  }
  KOLO_TRY(check_codec_inputs(caller, c.fout, c.fin, c.wout, c.win, c.nwin, c.count, c.fmt, c.scale));
  if (!dev.kind.runs_kernels) {
    return error(Code::kUnsupported, caller, ": no device runtime (backend '", dev.name, "')");
  }
  if (c.count == 0) return Status::ok_status();
  device::Launch l;
  l.args = &c;
  l.args_bytes = sizeof(c);
  l.emulated = emulated_codec_block;
#if defined(KOLO_KERNELS_HAVE_CUDA)
  l.cuda = cuda_codec_launch;
#endif
  return launch_on(dev, l, stream, caller);
}

CodecLaunch codec_sum(CodecOp op, const void* const* wires, int nwires, size_t count, WireFormat fmt, Scale scale) {
  CodecLaunch c;
  c.op = op;
  c.nwin = nwires;
  // (too many or null inputs are refused by launch_codec's checks)
  for (int k = 0; wires != nullptr && k < nwires && k < kMaxWireInputs; ++k) c.win[k] = wires[k];
  c.count = count;
  c.fmt = fmt;
  c.scale = scale;
  return c;
}

}  // namespace

ScopedKernelGuard::ScopedKernelGuard(const uint32_t* status) : previous_(t_kernel_guard) { t_kernel_guard = status; }
ScopedKernelGuard::~ScopedKernelGuard() { t_kernel_guard = previous_; }

Status device_compress(const device::DeviceOps& dev, void* wire, const float* src, size_t count, WireFormat fmt,
                       Scale scale, void* stream) {
  if (count > 0 && (wire == nullptr || src == nullptr)) {
    return error(Code::kInvalidArgument, "device_compress: ", wire == nullptr ? "wire" : "src", " is null with count ",
                 count);
  }
  CodecLaunch c = codec_sum(CodecOp::kCompress, nullptr, 0, count, fmt, scale);
  c.wout = wire;
  c.fin = src;
  return launch_codec(dev, "device_compress", c, stream);
}

Status device_decompress_sum(const device::DeviceOps& dev, float* dst, const void* const* wires, int nwires,
                             size_t count, WireFormat fmt, Scale scale, void* stream) {
  if (count > 0 && dst == nullptr) {
    return error(Code::kInvalidArgument, "device_decompress_sum: dst is null with count ", count);
  }
  CodecLaunch c = codec_sum(CodecOp::kDecompress, wires, nwires, count, fmt, scale);
  c.fout = dst;
  return launch_codec(dev, "device_decompress_sum", c, stream);
}

Status device_recompress_sum(const device::DeviceOps& dev, void* wire_out, const void* const* wires, int nwires,
                             size_t count, WireFormat fmt, Scale scale, void* stream) {
  if (count > 0 && wire_out == nullptr) {
    return error(Code::kInvalidArgument, "device_recompress_sum: wire_out is null with count ", count);
  }
  CodecLaunch c = codec_sum(CodecOp::kRecompress, wires, nwires, count, fmt, scale);
  c.wout = wire_out;
  return launch_codec(dev, "device_recompress_sum", c, stream);
}

Status device_preload_kernels(const device::DeviceOps& dev) {
  if (!dev.kind.gpu) return Status();
#if defined(KOLO_KERNELS_HAVE_CUDA)
  Result<int> device = dev.current_device();
  if (!device.ok()) return device.status();
  // Once per device and process; a second caller waits until the first has loaded them.
  static std::mutex m;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(m);
  if (loaded.count(device.value()) != 0) return Status();
  KOLO_TRY(cuda_reduce_preload());
  KOLO_TRY(cuda_barrier_preload());
  KOLO_TRY(cuda_codec_preload());
  KOLO_TRY(cuda_flagged_preload());
  loaded.insert(device.value());
#endif
  return Status();
}

Status device_barrier(const device::DeviceOps& dev, const BarrierArgs& args, void* stream) {
  if (args.ranks < 1 || args.ranks > kMaxIpcRanks || args.abort == nullptr || args.status == nullptr ||
      args.failed == nullptr) {
    return error(Code::kInvalidArgument, "device_barrier: ", args.ranks, " ranks (1..", kMaxIpcRanks,
                 ") or no abort, status or failed word");
  }
  device::Launch l;
  l.grid = 1;
  l.block = 1;
  l.args = &args;
  l.args_bytes = sizeof(args);
  l.emulated = emulated_barrier_block;
#if defined(KOLO_KERNELS_HAVE_CUDA)
  l.cuda = cuda_barrier_launch;
#endif
  return launch_on(dev, l, stream, "device_barrier");
}

Status device_flagged(const device::DeviceOps& dev, FlaggedArgs a, Scale pre, Scale post, void* stream) {
  const bool varying = a.kind == FlaggedKind::kAllgatherv;  // vbytes, vdispl given; count unused
  if (varying && (a.me < 0 || a.me >= kMaxIpcRanks)) return error(Code::kInvalidArgument, "device_flagged: rank ", a.me);
  // The most one rank sends one peer: the box holds that.
  const size_t block = varying  ? flagged_most_units(a) * kFlaggedUnitBytes
                       : a.wire ? flagged_wire_box_bytes(a.dtype, a.count)  // a.dtype: the wire type
                                : a.count * dtype_size(a.dtype);
  const bool rooted = a.kind == FlaggedKind::kReduce || a.kind == FlaggedKind::kBroadcast;
  // Only the root's send of a broadcast, and the root's recv of a reduce, are read.
  const bool reads_send = a.kind != FlaggedKind::kBroadcast || a.me == a.root;
  const bool writes_recv = a.kind != FlaggedKind::kReduce || a.me == a.root;
  if (a.ranks < 2 || a.ranks > kMaxIpcRanks || a.me < 0 || a.me >= a.ranks || block > kFlaggedMaxBytes ||
      (rooted && (a.root < 0 || a.root >= a.ranks)) || a.sequence == nullptr || a.done == nullptr ||
      a.abort == nullptr || a.status == nullptr || a.failed == nullptr ||
      (!varying && a.count > 0 && ((reads_send && a.send == nullptr) || (writes_recv && a.recv == nullptr))) ||
      (varying && ((a.vbytes[a.me] > 0 && a.send == nullptr) || (block > 0 && a.recv == nullptr)))) {
    return error(Code::kInvalidArgument, "device_flagged: rank ", a.me, " of ", a.ranks, " (2..", kMaxIpcRanks,
                 "), root ", a.root, ", ", block, " bytes per block (at most ", kFlaggedMaxBytes,
                 "), or a null buffer or word");
  }
  const bool reduces = flagged_reduces(a);
  if (a.wire) {
    // Compressed allreduce: FLOAT32 in and out, `block` bytes of codes per rank.
    if (a.kind != FlaggedKind::kAllreduce || (a.dtype != DType::kFloat16 && a.dtype != DType::kBFloat16 && !flagged_fp8(a.dtype)) ||
        a.op != ReduceOp::kSum || pre.divisor < 1 || post.divisor < 1) {
      return error(Code::kInvalidArgument, "device_flagged: a compressed call must be an allreduce (sum) with an "
                   "fp16, bf16 or fp8 wire, not ", dtype_name(a.dtype), " ", op_name(a.op));
    }
    // As the codecs take them (kernels/compress.cc): factor / divisor in double, then float.
    a.wire_pre = static_cast<float>(pre.factor / static_cast<double>(pre.divisor));
    a.wire_post = static_cast<float>(post.factor / static_cast<double>(post.divisor));
  } else if (reduces) {
    // (dtype, op and scale; a rank that only sends has no recv: its send stands in)
    KOLO_TRY(check_reduce_args("device_flagged", writes_recv ? a.recv : a.send, &a.send, 1, a.count, a.dtype, a.op,
                               post));
    a.prescaled = !pre.identity();
    a.pre = scale_args(a.dtype, pre);
    a.post = scale_args(a.dtype, post);
  } else {  // copies move bytes
    a.count = varying ? a.vbytes[a.me] : block;
    a.dtype = DType::kUint8;
    a.op = ReduceOp::kSum;
    a.prescaled = false;
  }
  // Blocks start at multiples of the block size in the collectives that have several.
  const bool blocks = a.kind == FlaggedKind::kAllgather || a.kind == FlaggedKind::kReduceScatter ||
                      a.kind == FlaggedKind::kAlltoall;
  a.aligned = (!reads_send || reinterpret_cast<uintptr_t>(a.send) % kFlaggedUnitBytes == 0) &&
              (!writes_recv || reinterpret_cast<uintptr_t>(a.recv) % kFlaggedUnitBytes == 0) &&
              (!blocks || block % kFlaggedUnitBytes == 0);
  for (int r = 0; varying && r < a.ranks; ++r) a.aligned = a.aligned && a.vdispl[r] % kFlaggedUnitBytes == 0;
  // A unit per thread; the grid stays small, so that ranks sharing one GPU all fit on it
  // beside each other (each waits for the others' kernels).
  const size_t units = std::max<size_t>(1, flagged_units(block, 1));
  device::Launch l;
  l.grid = static_cast<unsigned>(std::min<size_t>(32, (units + kKernelThreads - 1) / kKernelThreads));
  l.block = kKernelThreads;
  l.args = &a;
  l.args_bytes = sizeof(a);
  l.emulated = emulated_flagged_block;
#if defined(KOLO_KERNELS_HAVE_CUDA)
  l.cuda = cuda_flagged_launch;
#endif
  return launch_on(dev, l, stream, "device_flagged");
}

ReducePlan plan_reduce(const void* dst, const void* const* srcs, int nsrcs, size_t count,
                       DType dtype, unsigned max_blocks) {
  const size_t es = dtype_size(dtype);
  const size_t per_pack = 16 / es;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(dst) % 16;
  bool same = true;
  for (int k = 0; k < nsrcs; ++k) same = same && reinterpret_cast<uintptr_t>(srcs[k]) % 16 == mis;
  ReducePlan p;
  if (same) {
    // Pointers are aligned to the element size, so (16 - mis) is a whole number of them.
    p.head = std::min(count, ((16 - mis) % 16) / es);
    p.npacks = (count - p.head) / per_pack;
  }
  const size_t tail = count - p.head - p.npacks * per_pack;
  const size_t threads = std::max({p.head, p.npacks, tail});
  const size_t blocks = std::max<size_t>(1, (threads + kKernelThreads - 1) / kKernelThreads);
  p.grid = static_cast<unsigned>(std::min<size_t>(blocks, std::max(1u, max_blocks)));
  return p;
}

Status device_reduce_into(const device::DeviceOps& dev, void* dst, const void* const* srcs,
                          int nsrcs, size_t count, DType dtype, ReduceOp op, Scale scale,
                          void* stream, unsigned max_blocks) {
  return launch_reduce(dev, "device_reduce_into", dst, srcs, nsrcs, count, dtype, op, scale, stream,
                       max_blocks);
}

Status device_scale_copy(const device::DeviceOps& dev, void* dst, const void* src, size_t count,
                         DType dtype, Scale scale, void* stream, unsigned max_blocks) {
  const void* srcs[1] = {src};
  return launch_reduce(dev, "device_scale_copy", dst, srcs, 1, count, dtype, ReduceOp::kSum, scale,
                       stream, max_blocks);
}

Status device_reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count,
                          DType dtype, ReduceOp op, Scale scale, void* stream) {
  return device_reduce_into(device::runtime(), dst, srcs, nsrcs, count, dtype, op, scale, stream);
}

Status device_scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale,
                         void* stream) {
  return device_scale_copy(device::runtime(), dst, src, count, dtype, scale, stream);
}

#if defined(KOLO_KERNELS_HAVE_CUDA)
// The CUDA-only entry points (kernels/cuda_kernels.h) are the cuda backend's launches.
Status cuda_reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count,
                        DType dtype, ReduceOp op, Scale scale, void* stream) {
  return launch_reduce(*device::cuda_ops(), "cuda_reduce_into", dst, srcs, nsrcs, count, dtype, op,
                       scale, stream, kKernelMaxBlocks);
}

Status cuda_scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale,
                       void* stream) {
  const void* srcs[1] = {src};
  return launch_reduce(*device::cuda_ops(), "cuda_scale_copy", dst, srcs, 1, count, dtype,
                       ReduceOp::kSum, scale, stream, kKernelMaxBlocks);
}
#endif

}  // namespace kolo
