// The collectives kolo-perf measures: per collective, how counts follow from a size,
// how buffers are filled, how one call is made, how the result is checked, and the
// nccl-tests bus-bandwidth factor.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace kolo_perf {

struct Case {
  kolo_dtype_t dtype = KOLO_FLOAT32;
  kolo_op_t op = KOLO_SUM;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  kolo_dtype_t wire = KOLO_DTYPE_COUNT;  // allreduce --wire: compressed on the wire
};

// The error of compressed allreduces checked since the last reset, in units of one wire
// rounding of the contributions: |got - exact| / (u * post * sum_r |x_r|), exact in fp64.
// The direct schemes bound it by 1 (one-shot) and 2 (two-shot) plus fp32 accumulation;
// check counts an element above 2.05 as wrong.
struct WireError {
  double max = 0;
  double sum = 0;
  size_t n = 0;
};
WireError& wire_error();

// kolo-perf --registered: one send and one recv buffer per rank for the whole run, from
// kolo_mem_alloc, registered with the communicator (kolo_mem_register), large enough for
// the largest size; every size's device mirrors are these.
struct Registered {
  kolo_comm_t comm = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;
  void* send_handle = nullptr;
  void* recv_handle = nullptr;
};
// Collective over comm; false (and why on stderr) on failure.
bool register_buffers(Registered& r, kolo_comm_t comm, size_t bytes);
void deregister_buffers(Registered& r);

// Buffers for one size; in-place calls use recv for both sides where the contract says so.
// Filled and checked in host memory; in device mode (kolo-perf -G) the calls use device
// mirrors (dsend, drecv) on `stream`, which device_upload/device_download copy.
struct Buffers {
  std::vector<char> send;
  std::vector<char> recv;
  bool device = false;
  char* dsend = nullptr;
  char* drecv = nullptr;
  void* stream = nullptr;  // the rank's (kept with its device memory for the whole run)
  const Registered* registered = nullptr;  // --registered: its buffers, not the rank's own
  Buffers() = default;
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  ~Buffers();
  char* send_ptr() { return device ? dsend : send.data(); }
  char* recv_ptr() { return device ? drecv : recv.data(); }
};

// Device mode, through kolo's device runtime (support/device: the emulated device, or a
// GPU): allocate the mirrors and a stream, copy the host buffers in; wait for the stream;
// copy the device buffers back for checking. Each returns false and prints why on failure.
// The device this rank uses: its local rank's, modulo the devices there are (call once).
bool device_select(int local_rank);
// Creates this thread's stream and allocates its device buffers (send and recv, `bytes`
// each; none for 0, as with registered buffers) now, so that no later call allocates (see
// Mirrors in perf_collectives.cc). device_upload uses them (and reserves larger ones
// itself where a call needs more).
bool reserve_device_buffers(size_t bytes);
// Frees this thread's device memory and stream (kept across sizes; see Mirrors). Before a
// communicator of thread-ranks is destroyed, every rank calls this, then a host barrier:
// a cudaFree waits for the whole device, so none may run while a peer's last device
// barrier waits for this rank.
void release_device_buffers();
int device_current();
bool device_upload(Buffers& b);
bool device_sync(Buffers& b);
bool device_download(Buffers& b);
// --graph: the timed calls captured into one CUDA graph on the buffers' stream, launched.
bool device_capture_begin(Buffers& b);
void* device_capture_end(Buffers& b);  // the graph, or null (and why on stderr)
bool device_graph_launch(Buffers& b, void* graph);
void device_graph_destroy(void* graph);
// Which device runtime runs ("emulated", "cuda", "none").
const char* device_runtime_name();

struct Collective {
  const char* name;
  bool reduces;  // has an op column
  bool rooted;   // has a root column
  // Elements per call argument (count), from the table's size in bytes.
  size_t (*count_for)(size_t bytes, const Case& c);
  // Bytes the table reports for a count (nccl-tests' "size").
  size_t (*size_for)(size_t count, const Case& c);
  double busbw_factor(int nranks) const;
  // Allocates and fills the buffers for count.
  void (*prepare)(Buffers& b, size_t count, const Case& c, bool in_place);
  kolo_result_t (*call)(Buffers& b, size_t count, const Case& c, bool in_place, kolo_comm_t comm);
  // Number of wrong elements on this rank.
  size_t (*check)(const Buffers& b, size_t count, const Case& c, bool in_place);
};

const Collective* find_collective(const std::string& name);
std::vector<std::string> collective_names();

}  // namespace kolo_perf
