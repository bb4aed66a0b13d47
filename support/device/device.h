// The device runtime: everything kolo asks of a GPU, as one small ops table (the way UCX's
// layers meet their backends). Two backends fill it:
//   cuda      the CUDA runtime, linked statically; only where nvcc built kolo and a GPU
//             and driver are present at run time (cuda_device.cc);
//   emulated  a CPU device for tests and for trying the device API without a GPU: device
//             memory is memfd-backed host memory (shareable between processes like CUDA
//             IPC memory), a stream is a FIFO worker thread, events are real, IPC passes
//             the memfd (emulated_device.cc).
// KOLO_DEVICE=auto|cuda|emulated|none picks one per process (auto: cuda when a GPU is
// present, else none). In support/ so that kernels, transports and the engine can all use
// it; it includes only support/.
//
// Streams and events travel as void* (a cudaStream_t / cudaEvent_t for cuda; nullptr is
// the default stream). Copies, host functions and launches are asynchronous on the stream;
// the returned Status covers what is known at enqueue time. Every wait takes a deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "support/clock.h"
#include "support/status.h"

namespace kolo::device {

enum class MemoryKind : uint8_t {
  kHost,        // ordinary host memory (or unknown to the runtime)
  kDevice,      // device memory of `device`
  kPinnedHost,  // page-locked host memory from host_alloc
};

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;
};

// The device allocation that holds a pointer (what ipc_export takes and an importer maps).
// `id` names the allocation for as long as the process lives: one freed and another made
// at the same address get different ids (CUDA's CU_POINTER_ATTRIBUTE_BUFFER_ID), so a
// cache keyed by it never takes a new allocation for an old one.
struct DeviceAllocation {
  void* base = nullptr;
  size_t bytes = 0;
  uint64_t id = 0;
};

// An exported allocation; plain bytes, so it can travel through the rendezvous store.
struct IpcHandle {
  uint8_t bytes[64] = {};
};

// A kernel launch as the ops table takes it: a grid of blocks of threads and one body.
// The emulated backend runs `emulated` for every block, in order, on the stream's worker
// (the body loops over its threads); the cuda backend calls `cuda`, a thin function in a
// .cu file that launches the __global__ wrapper of the same __host__ __device__ body.
struct Launch {
  unsigned grid = 1;
  unsigned block = 1;
  const void* args = nullptr;  // copied by the caller's wrapper into what the bodies read
  size_t args_bytes = 0;       // the emulated backend copies this many bytes at enqueue
  void (*emulated)(const void* args, unsigned block_index, unsigned grid, unsigned block) = nullptr;
  Status (*cuda)(const void* args, unsigned grid, unsigned block, void* stream) = nullptr;
};

// What a backend is, for the code that must know (instead of comparing names).
struct DeviceKind {
  bool gpu;           // a real GPU (cuda): NCCL runs on it; kernels need their .cu launchers
  bool runs_kernels;  // kernels and copies run (cuda, emulated; not "none")
  bool maps_peers;    // ipc_export/ipc_import can map another rank's device memory
};

struct DeviceOps {
  const char* name;  // "cuda", "emulated", "none": for messages
  DeviceKind kind;

  int (*device_count)();
  Status (*set_device)(int device);  // for this thread
  Result<int> (*current_device)();
  // Whether this thread has a device context already (so that allocating pinned memory now
  // creates none): kolo takes its pinned staging early only then. Never creates one.
  bool (*context_current)();

  Status (*malloc)(void** ptr, size_t bytes);  // device memory of the current device
  Status (*free)(void* ptr);
  Status (*host_alloc)(void** ptr, size_t bytes);  // pinned host memory
  Status (*host_free)(void* ptr);
  PointerInfo (*pointer_info)(const void* ptr);  // never creates a context

  Status (*memcpy_async)(void* dst, const void* src, size_t bytes, void* stream);
  Status (*memset_async)(void* dst, int value, size_t bytes, void* stream);

  Status (*stream_create)(void** stream);
  Status (*stream_destroy)(void* stream);
  Status (*stream_synchronize)(void* stream, const Deadline& deadline);
  // Whether work enqueued on the stream now is being captured into a CUDA graph.
  Result<bool> (*stream_capturing)(void* stream);

  Status (*event_create)(void** event);
  Status (*event_destroy)(void* event);
  Status (*event_record)(void* event, void* stream);
  Status (*stream_wait_event)(void* stream, void* event);
  Result<bool> (*event_query)(void* event);  // true once the work before the record is done
  Status (*event_synchronize)(void* event, const Deadline& deadline);

  // Runs fn(arg) on a host thread once the work enqueued before it is done; later work on
  // the stream waits for it. As in CUDA, one thread runs the host functions of every
  // stream of the process, in the order they become ready: a host function that waits
  // holds every other stream's host functions back, and may not call the runtime. kolo
  // itself enqueues none (assert_may_block catches one that would wait).
  Status (*launch_host_func)(void* stream, void (*fn)(void*), void* arg);
  // Stream memory operations on a 32-bit word of pinned host memory (host_alloc: mapped,
  // so the device reads and writes it at the same address). wait_value holds the stream
  // on the device until (int32_t)(*word - value) >= 0 (a sequence number that wraps);
  // write_value stores `value` once the work before it is done. This is how a host thread
  // holds and releases a stream without a host function (cuStreamWaitValue32 /
  // cuStreamWriteValue32, or a one-thread polling kernel where those are missing). A
  // wait has no deadline of its own on a GPU: whoever enqueues one must write the word
  // within KOLO_TIMEOUT whatever happens (the emulated device fails the stream at twice
  // that, so a test sees a word never written).
  Status (*wait_value)(void* stream, uint32_t* word, uint32_t value);
  Status (*write_value)(void* stream, uint32_t* word, uint32_t value);
  Status (*launch)(const Launch& launch, void* stream);

  // CUDA graphs, for callers that capture kolo's calls (tests, kolo-perf --graph): begin
  // capturing the stream's work (this thread's only), end it into an executable graph,
  // launch that on a stream (replaying the same work, kernel arguments as captured),
  // destroy it. The emulated device records the work items and enqueues them again; it
  // refuses events on a capturing stream (kolo must not need them there).
  Status (*stream_begin_capture)(void* stream);
  Status (*stream_end_capture)(void* stream, void** graph);
  Status (*graph_launch)(void* graph, void* stream);
  Status (*graph_destroy)(void* graph);

  // IPC: a device allocation (the pointer malloc returned) of this process, mapped by
  // another process of the same user on this host.
  Status (*ipc_export)(void* ptr, IpcHandle* handle);
  Status (*ipc_import)(const IpcHandle& handle, void** ptr);
  Status (*ipc_close)(void* ptr);
  // The device allocation holding ptr (what ipc_export takes): its start, size and id. An
  // error where ptr is not device memory of this process that IPC can export (an
  // imported mapping included).
  Status (*allocation_of)(const void* ptr, DeviceAllocation* allocation);
  // A name of the physical device, the same in every process that uses it whatever its
  // index there (CUDA_VISIBLE_DEVICES renumbers): the PCI address on cuda.
  Result<std::string> (*identity)(int device);
};

// The backend KOLO_DEVICE chose for this process (decided once, on first use). With no
// device, every op but device_count and pointer_info returns kUnsupported.
const DeviceOps& runtime();

// Makes `device` current on this thread while it lives, then restores the device that was
// (nothing when device < 0 or it is current already). kolo enqueues a call's copies and
// kernels on the device that owns its buffers, whatever the caller's thread had current,
// as NCCL does with its communicator's device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;  // the device to restore; -1: nothing to restore
  Status status_;
};

// Host functions run on the runtime's host-function thread, which every stream of the
// process shares: one that waits on anything stalls them all. kolo's code calls this
// before any wait that could last (a host collective, a barrier, a condition variable with
// a deadline); on the host-function thread it aborts in debug builds and returns an error
// in release builds, naming `what`.
Status assert_may_block(const char* what);
// Whether this thread is running a host function now (set by both backends around fn).
bool in_host_function();
void set_in_host_function(bool in);  // for the backends

// Backends (each in its own file; the cuda one only in builds with nvcc).
const DeviceOps& emulated_ops();
const DeviceOps& none_ops();
const DeviceOps* cuda_ops();  // null in builds without CUDA
// Whether the cuda backend finds a driver and at least one GPU (no context is created).
bool cuda_present();

}  // namespace kolo::device
