// The cuda backend: the device runtime's ops table over the CUDA runtime API (linked
// statically, so libkolo loads where there is no driver) plus three driver entry points
// taken from libcuda.so.1 with dlsym. Only real hardware can check this file: keep it
// thin, one CUDA call per op, and check every call's own return value.
//   - Presence and pointer queries use the driver directly: neither may create a context
//     (cudaPointerGetAttributes on a host buffer creates one on GPU 0 in every rank).
//   - Errors come from each call's own result, never cudaGetLastError (that would report,
//     and clear, an error some other call left behind).
//   - No wait is unbounded: synchronisation polls the stream or event until a Deadline.
#include <cuda.h>  // driver types and enums only; libcuda is dlopen'ed, never linked
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "support/device/device.h"
#include "support/env.h"

namespace kolo::device {

// stream_word_kernels.cu: where the driver has no stream memory operations.
Status cuda_wait_word_kernel(void* stream, uint32_t* word, uint32_t value, double timeout_s);
Status cuda_write_word_kernel(void* stream, uint32_t* word, uint32_t value);

namespace {

// ---- the driver, through dlopen ---------------------------------------------------------

struct Driver {
  bool present = false;  // libcuda loads, cuInit succeeds and there is a GPU
  CUresult (*get_attribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
  // Several attributes in one call (every device call classifies its buffers: one driver
  // call per buffer instead of two; null where the driver lacks it).
  CUresult (*get_attributes)(unsigned, CUpointer_attribute*, void**, CUdeviceptr) = nullptr;
  // Stream memory operations (null where the driver lacks them: the kernels stand in).
  CUresult (*wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned) = nullptr;
  CUresult (*write_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
};

// The _v2 entry points are the ones CUDA 12 and later export (the first versions are gone).
template <class F>
F driver_symbol(void* lib, const char* v2, const char* v1) {
  void* f = dlsym(lib, v2);
  if (f == nullptr) f = dlsym(lib, v1);
  return reinterpret_cast<F>(f);
}

// Loaded once per process; a missing driver is the normal case on a CPU machine: silent.
// The handle is never dlclose'd (the CUDA runtime holds libcuda open as well).
const Driver& driver() {
  static const Driver d = [] {
    Driver out;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return out;
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CUresult (*)(int*)>(dlsym(lib, "cuDeviceGetCount"));
    auto attr = reinterpret_cast<CUresult (*)(void*, CUpointer_attribute, CUdeviceptr)>(
        dlsym(lib, "cuPointerGetAttribute"));
    if (init == nullptr || count == nullptr || attr == nullptr) return out;
    // cuInit initialises the driver for this process; it creates no context.
    if (init(0) != CUDA_SUCCESS) return out;
    int devices = 0;
    if (count(&devices) != CUDA_SUCCESS || devices <= 0) return out;
    out.present = true;
    out.get_attribute = attr;
    out.get_attributes = reinterpret_cast<decltype(out.get_attributes)>(dlsym(lib, "cuPointerGetAttributes"));
    out.wait_value32 = driver_symbol<decltype(out.wait_value32)>(lib, "cuStreamWaitValue32_v2", "cuStreamWaitValue32");
    out.ctx_get_current = reinterpret_cast<CUresult (*)(CUcontext*)>(dlsym(lib, "cuCtxGetCurrent"));
    out.write_value32 = driver_symbol<decltype(out.write_value32)>(lib, "cuStreamWriteValue32_v2", "cuStreamWriteValue32");
    return out;
  }();
  return d;
}

// ---- errors -----------------------------------------------------------------------------

Code code_of(cudaError_t rc) {
  if (rc == cudaErrorInvalidValue || rc == cudaErrorInvalidDevicePointer || rc == cudaErrorInvalidDevice ||
      rc == cudaErrorInvalidResourceHandle) {
    return Code::kInvalidArgument;
  }
  return Code::kSystem;  // out of memory, no driver, a failed launch, ...
}

// "cuda: <op>(<args>): <what CUDA says> (<error name>)"
template <class... A>
Status fail(cudaError_t rc, const char* op, const A&... args) {
  return error(code_of(rc), "cuda: ", op, "(", args..., "): ", cudaGetErrorString(rc), " (", cudaGetErrorName(rc),
               ")");
}

template <class... A>
Status check(cudaError_t rc, const char* op, const A&... args) {
  return rc == cudaSuccess ? Status() : fail(rc, op, args...);
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// Polls query() (cudaStreamQuery / cudaEventQuery) until it stops saying "not ready" or
// the deadline passes: spin briefly (short kernels finish in microseconds), then sleep.
template <class Query>
Status poll_until_done(Query query, const Deadline& deadline, const char* op, const void* what) {
  for (int round = 0;; ++round) {
    const cudaError_t rc = query();
    if (rc == cudaSuccess) return Status();
    if (rc != cudaErrorNotReady) return fail(rc, op, what);
    if (deadline.expired()) return error(Code::kTimeout, "cuda: ", op, "(", what, "): work still pending at the deadline");
    if (round < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 20 : 200));
    }
  }
}

// ---- the ops ----------------------------------------------------------------------------

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

Status cuda_set_device(int device) { return check(cudaSetDevice(device), "cudaSetDevice", device); }

Result<int> cuda_current_device() {
  int device = -1;
  const cudaError_t rc = cudaGetDevice(&device);
  if (rc != cudaSuccess) return fail(rc, "cudaGetDevice", "");
  return device;
}

bool cuda_context_current() {
  const Driver& d = driver();
  CUcontext context = nullptr;
  return d.ctx_get_current != nullptr && d.ctx_get_current(&context) == CUDA_SUCCESS && context != nullptr;
}

Status cuda_malloc(void** ptr, size_t bytes) { return check(cudaMalloc(ptr, bytes), "cudaMalloc", bytes, " bytes"); }
Status cuda_free(void* ptr) { return check(cudaFree(ptr), "cudaFree", ptr); }

// Portable: pinned for every device's context, not only the current one's.
Status cuda_host_alloc(void** ptr, size_t bytes) {
  // Mapped: kernels read and write it through the same pointer (UVA), as the IPC
  // barrier does its abort and status words.
  return check(cudaHostAlloc(ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc", bytes,
               " bytes, portable, mapped");
}
Status cuda_host_free(void* ptr) { return check(cudaFreeHost(ptr), "cudaFreeHost", ptr); }

// The driver's attribute query creates no context; anything it does not know (ordinary
// host memory, no driver, another error) is host memory.
PointerInfo cuda_pointer_info(const void* ptr) {
  PointerInfo info;
  const Driver& d = driver();
  if (ptr == nullptr || d.get_attribute == nullptr) return info;
  const auto address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  unsigned int type = 0;
  int ordinal = -1;
  if (d.get_attributes != nullptr) {
    // Memory the driver does not know (plain host memory) gives success with type 0.
    CUpointer_attribute which[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void* values[2] = {&type, &ordinal};
    if (d.get_attributes(2, which, values, address) != CUDA_SUCCESS) return info;
  } else if (d.get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) != CUDA_SUCCESS ||
             (type != CU_MEMORYTYPE_HOST &&
              d.get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) != CUDA_SUCCESS)) {
    return info;
  }
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      info.kind = MemoryKind::kPinnedHost;
      return info;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:  // managed memory: kolo treats it as device memory
      info.kind = MemoryKind::kDevice;
      break;
    default:
      return info;
  }
  info.device = ordinal;
  return info;
}

Status cuda_memcpy_async(void* dst, const void* src, size_t bytes, void* stream) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)), "cudaMemcpyAsync", dst, " <- ",
               src, ", ", bytes, " bytes, stream ", stream);
}

Status cuda_memset_async(void* dst, int value, size_t bytes, void* stream) {
  return check(cudaMemsetAsync(dst, value, bytes, as_stream(stream)), "cudaMemsetAsync", dst, ", value ", value, ", ",
               bytes, " bytes, stream ", stream);
}

// Non-blocking: kolo's streams must not serialise with the legacy default stream.
Status cuda_stream_create(void** stream) {
  cudaStream_t s = nullptr;
  KOLO_TRY(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", "non-blocking"));
  *stream = s;
  return Status();
}

Status cuda_stream_destroy(void* stream) { return check(cudaStreamDestroy(as_stream(stream)), "cudaStreamDestroy", stream); }

Result<bool> cuda_stream_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  KOLO_TRY(check(cudaStreamIsCapturing(as_stream(stream), &status), "cudaStreamIsCapturing", stream));
  return status != cudaStreamCaptureStatusNone;
}

Status cuda_stream_synchronize(void* stream, const Deadline& deadline) {
  return poll_until_done([s = as_stream(stream)] { return cudaStreamQuery(s); }, deadline, "stream_synchronize", stream);
}

Status cuda_event_create(void** event) {
  cudaEvent_t e = nullptr;
  KOLO_TRY(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", "disable timing"));
  *event = e;
  return Status();
}

Status cuda_event_destroy(void* event) { return check(cudaEventDestroy(as_event(event)), "cudaEventDestroy", event); }

Status cuda_event_record(void* event, void* stream) {
  return check(cudaEventRecord(as_event(event), as_stream(stream)), "cudaEventRecord", event, ", stream ", stream);
}

Status cuda_stream_wait_event(void* stream, void* event) {
  return check(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0), "cudaStreamWaitEvent", stream, ", event ",
               event);
}

Result<bool> cuda_event_query(void* event) {
  const cudaError_t rc = cudaEventQuery(as_event(event));
  if (rc == cudaSuccess) return true;
  if (rc == cudaErrorNotReady) return false;
  return fail(rc, "cudaEventQuery", event);
}

Status cuda_event_synchronize(void* event, const Deadline& deadline) {
  return poll_until_done([e = as_event(event)] { return cudaEventQuery(e); }, deadline, "event_synchronize", event);
}

// fn runs marked as a host function (assert_may_block).
struct HostCall {
  void (*fn)(void*);
  void* arg;
};
void run_host_call(void* p) {
  HostCall call = *static_cast<HostCall*>(p);
  delete static_cast<HostCall*>(p);
  set_in_host_function(true);
  call.fn(call.arg);
  set_in_host_function(false);
}

Status cuda_launch_host_func(void* stream, void (*fn)(void*), void* arg) {
  auto* call = new HostCall{fn, arg};
  const cudaError_t rc = cudaLaunchHostFunc(as_stream(stream), run_host_call, call);
  if (rc != cudaSuccess) delete call;
  return check(rc, "cudaLaunchHostFunc", "stream ", stream);
}

// The word's device address (mapped pinned memory: the same under UVA, asked all the same).
Status word_address(uint32_t* word, CUdeviceptr* address) {
  void* device = nullptr;
  KOLO_TRY(check(cudaHostGetDevicePointer(&device, word, 0), "cudaHostGetDevicePointer", word));
  *address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(device));
  return Status();
}

// Whether a driver call came back "not supported" (the kernels stand in then, for good).
std::atomic<bool> stream_ops_unsupported{false};

using StreamWordOp = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);

// One stream memory operation on the word: the driver's `op` (with `flags`), else the
// kernel that stands in for it (`kernel`, given the word's device address).
template <class Kernel>
Status stream_word(const char* name, StreamWordOp op, unsigned flags, void* stream, uint32_t* word, uint32_t value,
                   Kernel kernel) {
  CUdeviceptr address = 0;
  KOLO_TRY(word_address(word, &address));
  if (op != nullptr && !stream_ops_unsupported.load(std::memory_order_relaxed)) {
    const CUresult rc = op(as_stream(stream), address, value, flags);
    if (rc == CUDA_SUCCESS) return Status();
    if (rc != CUDA_ERROR_NOT_SUPPORTED) {
      return error(Code::kSystem, "cuda: ", name, "(stream ", stream, ", word ", word, ", ", value,
                   ") failed with CUresult ", static_cast<int>(rc));
    }
    stream_ops_unsupported.store(true, std::memory_order_relaxed);
  }
  return kernel(reinterpret_cast<uint32_t*>(address));
}

Status cuda_wait_value(void* stream, uint32_t* word, uint32_t value) {
  return stream_word("cuStreamWaitValue32", driver().wait_value32, CU_STREAM_WAIT_VALUE_GEQ, stream, word, value,
                     [&](uint32_t* at) { return cuda_wait_word_kernel(stream, at, value, 2 * env_timeout_seconds() + 5); });
}

Status cuda_write_value(void* stream, uint32_t* word, uint32_t value) {
  return stream_word("cuStreamWriteValue32", driver().write_value32, CU_STREAM_WRITE_VALUE_DEFAULT, stream, word, value,
                     [&](uint32_t* at) { return cuda_write_word_kernel(stream, at, value); });
}

// The kernel's .cu wrapper does the <<<>>> launch and checks it; here only the dispatch.
Status cuda_launch(const Launch& l, void* stream) {
  if (l.cuda == nullptr) {
    return error(Code::kInvalidArgument, "cuda: launch of a kernel with no CUDA body (grid ", l.grid, ", block ",
                 l.block, ")");
  }
  return l.cuda(l.args, l.grid, l.block, stream);
}

// Thread-local capture: other threads (other ranks' threads included) may go on making
// CUDA calls that a global-mode capture would turn into errors.
Status cuda_stream_begin_capture(void* stream) {
  return check(cudaStreamBeginCapture(as_stream(stream), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture",
               stream);
}

Status cuda_stream_end_capture(void* stream, void** graph) {
  cudaGraph_t g = nullptr;
  KOLO_TRY(check(cudaStreamEndCapture(as_stream(stream), &g), "cudaStreamEndCapture", stream));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiate(&exec, g, 0);
  (void)cudaGraphDestroy(g);
  KOLO_TRY(check(rc, "cudaGraphInstantiate", "captured on stream ", stream));
  *graph = exec;
  return Status();
}

Status cuda_graph_launch(void* graph, void* stream) {
  return check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), as_stream(stream)), "cudaGraphLaunch", graph);
}

Status cuda_graph_destroy(void* graph) {
  return check(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)), "cudaGraphExecDestroy", graph);
}

static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(IpcHandle::bytes), "a CUDA IPC handle must fit in an IpcHandle");

Status cuda_ipc_export(void* ptr, IpcHandle* handle) {
  cudaIpcMemHandle_t h{};
  KOLO_TRY(check(cudaIpcGetMemHandle(&h, ptr), "cudaIpcGetMemHandle", ptr));
  *handle = IpcHandle{};
  std::memcpy(handle->bytes, &h, sizeof(h));
  return Status();
}

// Lazy peer access: the mapping works from the importer's device whether or not peer
// access was enabled before.
Status cuda_ipc_import(const IpcHandle& handle, void** ptr) {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.bytes, sizeof(h));
  return check(cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle",
               "lazy peer access");
}

Status cuda_ipc_close(void* ptr) { return check(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle", ptr); }

// The driver's range attributes: the cudaMalloc allocation that holds ptr, which is what
// CUDA IPC exports and maps (an importer gets the allocation's start).
Status cuda_allocation_of(const void* ptr, DeviceAllocation* allocation) {
  const Driver& d = driver();
  if (d.get_attribute == nullptr) return error(Code::kUnsupported, "cuda: no driver to ask about ", ptr);
  const auto address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  CUdeviceptr start = 0;
  size_t size = 0;
  unsigned long long id = 0;  // NOLINT(runtime/int): the driver's type
  if (d.get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address) != CUDA_SUCCESS ||
      d.get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, address) != CUDA_SUCCESS ||
      d.get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, address) != CUDA_SUCCESS) {
    return error(Code::kInvalidArgument, "cuda: ", ptr, " is not in a device allocation (cuPointerGetAttribute)");
  }
  // Managed, stream-ordered pool and cuMemCreate memory have ranges too, but CUDA IPC
  // cannot export them.
  int legacy_ipc = 0;
  if (d.get_attribute(&legacy_ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, address) != CUDA_SUCCESS ||
      legacy_ipc == 0) {
    return error(Code::kInvalidArgument, "cuda: ", ptr, " is not cudaMalloc memory (managed, pool or cuMemCreate "
                 "memory cannot be shared through CUDA IPC)");
  }
  *allocation = DeviceAllocation{reinterpret_cast<void*>(static_cast<uintptr_t>(start)), size, id};
  return Status();
}

Result<std::string> cuda_identity(int device) {
  char bus[32] = {};
  KOLO_TRY(check(cudaDeviceGetPCIBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId", device));
  return std::string(bus);
}

const DeviceOps kCuda = {
    "cuda",
    {true, true, true},
    cuda_device_count,
    cuda_set_device,
    cuda_current_device,
    cuda_context_current,
    cuda_malloc,
    cuda_free,
    cuda_host_alloc,
    cuda_host_free,
    cuda_pointer_info,
    cuda_memcpy_async,
    cuda_memset_async,
    cuda_stream_create,
    cuda_stream_destroy,
    cuda_stream_synchronize,
    cuda_stream_capturing,
    cuda_event_create,
    cuda_event_destroy,
    cuda_event_record,
    cuda_stream_wait_event,
    cuda_event_query,
    cuda_event_synchronize,
    cuda_launch_host_func,
    cuda_wait_value,
    cuda_write_value,
    cuda_launch,
    cuda_stream_begin_capture,
    cuda_stream_end_capture,
    cuda_graph_launch,
    cuda_graph_destroy,
    cuda_ipc_export,
    cuda_ipc_import,
    cuda_ipc_close,
    cuda_allocation_of,
    cuda_identity,
};

}  // namespace

const DeviceOps* cuda_ops() { return &kCuda; }
bool cuda_present() { return driver().present; }

}  // namespace kolo::device
