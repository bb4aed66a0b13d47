// The emulated device: a CPU stand-in for a GPU that behaves like one where kolo can tell.
//   memory   device allocations are memfd mappings (so another process can map them, as
//            CUDA IPC does), registered so that pointer_info knows them; pinned host
//            memory is ordinary memory registered as pinned;
//   streams  a FIFO worker thread each (nullptr: one per-process default stream); work
//            runs in order, one item at a time; a failed item makes the stream's error
//            sticky, as a CUDA stream's is; a full stream (kEmulatedStreamDepth items)
//            makes the enqueueing call wait, as CUDA's does;
//   events   a generation counter per event: record enqueues "generation g reached",
//            waits wait for it (with KOLO_TIMEOUT on the worker, never forever);
//   launch   the kernel's block body, for every block in order, on the stream's worker;
//   IPC      the handle names this process and the memfd; the importer opens it through
//            /proc/<pid>/fd (same user; the kernel checks it) and maps it;
//   graphs   capturing a stream records its work items instead of running them; a launch
//            enqueues them again, as one; events and synchronize refuse a capturing stream.
// There are kEmulatedDevices devices; an allocation belongs to the thread's current one.
//
// Where CUDA constrains a program, the emulated device constrains it alike, so that what
// deadlocks or fails on a GPU deadlocks or fails here (tests named *cuda_semantics*):
//   - host functions of every stream run on one process-wide thread, in the order they
//     become ready; a stream waits for its host function there, so one that blocks holds
//     back the others (and calling the device runtime from one is an error);
//   - malloc, free, host_alloc, host_free and end_capture (which instantiates the graph)
//     wait for all work queued on the device (its streams and the default stream), as
//     CUDA's implicit synchronisation does; past KOLO_TIMEOUT they fail and say that a
//     GPU would have deadlocked there;
//   - during a capture, the capturing thread may not synchronize, query events, allocate
//     or free, nor use the legacy default stream: the call fails and the capture is
//     invalidated (end_capture fails), as in CUDA's thread-local capture mode;
//   - a full stream blocks the enqueueing thread (kEmulatedStreamDepth);
//   - wait_value polls its word on the stream's worker (a GPU's front end waits, with no
//     deadline: after 2 x KOLO_TIMEOUT + 5 s the emulated one fails the stream instead).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/device/device.h"
#include "support/env.h"

namespace kolo::device {
namespace {

constexpr int kEmulatedDevices = 8;
// Work a stream holds before enqueueing blocks. CUDA's queue is not documented; launches
// are seen to block past about 1000 pending items per stream.
constexpr size_t kEmulatedStreamDepth = 1024;
constexpr uint64_t kHandleMagic = 0x31636970756d656bull;  // "kemupic1"

// ---- memory ----------------------------------------------------------------------------

struct Allocation {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
  int device = 0;
  int fd = -1;          // memfd (device memory, exported or imported); -1 for pinned host
  bool mapped = true;   // munmap on free (device); pinned host is delete[]'d
  bool imported = false;
  uint64_t id = 0;      // device allocations: never reused in the process (DeviceAllocation)
};

// The next allocation id (under memory_mutex): addresses are reused after a free (mmap
// hands the same range out again), ids are not.
uint64_t next_allocation_id = 1;

struct IpcWire {
  uint64_t magic;
  int64_t pid;
  int64_t fd;
  uint64_t bytes;
  int64_t device;
};
static_assert(sizeof(IpcWire) <= sizeof(IpcHandle::bytes));

std::mutex& memory_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, Allocation>& allocations() {  // by base address
  static std::map<uintptr_t, Allocation> a;
  return a;
}

thread_local int current = 0;

// ---- capture rules ----------------------------------------------------------------------

class Stream;
// The streams this thread is capturing (CUDA's thread-local capture mode): what it may not
// do meanwhile fails and invalidates them.
thread_local std::vector<Stream*> captures_here;
void invalidate_captures_here();

Status refuse_during_capture(const char* what) {
  if (captures_here.empty()) return Status();
  invalidate_captures_here();
  return error(Code::kInvalidArgument, "emulated device: ", what, " while this thread captures a stream (CUDA: "
               "cudaErrorStreamCaptureUnsupported; the capture is invalidated)");
}

// The device runtime may not be called from a host function (CUDA: cudaErrorNotPermitted).
Status refuse_in_host_function(const char* what) {
  if (!in_host_function()) return Status();
  return error(Code::kInvalidArgument, "emulated device: ", what, " called from a host function (CUDA forbids "
               "device runtime calls there)");
}

// What must wait for all queued device work first (defined with the streams).
Status implicit_synchronization(const char* what);

// Allocation and freeing: not during a capture, not in a host function, and only once the
// device is idle.
Status allocation_allowed(const char* what) {
  KOLO_TRY(refuse_in_host_function(what));
  KOLO_TRY(refuse_during_capture(what));
  return implicit_synchronization(what);
}

// The allocation holding p, or end().
std::map<uintptr_t, Allocation>::iterator find_allocation(const void* p) {
  auto& all = allocations();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = all.upper_bound(a);
  if (it == all.begin()) return all.end();
  --it;
  return a < it->first + std::max<size_t>(it->second.bytes, 1) ? it : all.end();
}

Status map_memfd(int fd, size_t bytes, void** ptr) {
  void* p = ::mmap(nullptr, std::max<size_t>(bytes, 1), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return error(Code::kSystem, "emulated device: mmap of ", bytes, " bytes failed: ", std::strerror(errno));
  *ptr = p;
  return Status();
}

Status emu_malloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return error(Code::kInvalidArgument, "emulated device: malloc with a null result pointer");
  KOLO_TRY(allocation_allowed("malloc"));
  const int fd = ::memfd_create("kolo-emulated-device", MFD_CLOEXEC);
  if (fd < 0) return error(Code::kSystem, "emulated device: memfd_create failed: ", std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(std::max<size_t>(bytes, 1))) != 0) {
    const int e = errno;
    ::close(fd);
    return error(Code::kSystem, "emulated device: out of memory allocating ", bytes, " bytes: ", std::strerror(e));
  }
  void* p = nullptr;
  Status s = map_memfd(fd, bytes, &p);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  std::lock_guard<std::mutex> lock(memory_mutex());
  allocations()[reinterpret_cast<uintptr_t>(p)] =
      Allocation{bytes, MemoryKind::kDevice, current, fd, true, false, next_allocation_id++};
  *ptr = p;
  return Status();
}

Status release(void* ptr, MemoryKind kind, const char* what) {
  if (ptr == nullptr) return Status();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(memory_mutex());
    auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations().end() || it->second.kind != kind) {
      return error(Code::kInvalidArgument, "emulated device: ", what, " of ", ptr, ", which is not an allocation of that kind");
    }
    a = it->second;
    allocations().erase(it);
  }
  if (a.mapped) ::munmap(ptr, std::max<size_t>(a.bytes, 1));
  else delete[] static_cast<char*>(ptr);
  if (a.fd >= 0) ::close(a.fd);
  return Status();
}

Status emu_free(void* ptr) {
  if (ptr == nullptr) return Status();
  KOLO_TRY(allocation_allowed("free"));
  {
    std::lock_guard<std::mutex> lock(memory_mutex());
    auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
    if (it != allocations().end() && it->second.imported) {
      return error(Code::kInvalidArgument, "emulated device: free of an imported IPC mapping (use ipc_close)");
    }
  }
  return release(ptr, MemoryKind::kDevice, "free");
}

Status emu_host_alloc(void** ptr, size_t bytes) {
  KOLO_TRY(allocation_allowed("host_alloc"));
  char* p = new (std::nothrow) char[std::max<size_t>(bytes, 1)];
  if (p == nullptr) return error(Code::kSystem, "emulated device: out of memory allocating ", bytes, " pinned bytes");
  std::lock_guard<std::mutex> lock(memory_mutex());
  allocations()[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, MemoryKind::kPinnedHost, -1, -1, false, false};
  *ptr = p;
  return Status();
}

Status emu_host_free(void* ptr) {
  if (ptr == nullptr) return Status();
  KOLO_TRY(allocation_allowed("host_free"));
  return release(ptr, MemoryKind::kPinnedHost, "host_free");
}

PointerInfo emu_pointer_info(const void* ptr) {
  std::lock_guard<std::mutex> lock(memory_mutex());
  auto it = find_allocation(ptr);
  if (it == allocations().end()) return PointerInfo{};
  return PointerInfo{it->second.kind, it->second.device};
}

int emu_device_count() { return kEmulatedDevices; }
Status emu_set_device(int device) {
  if (device < 0 || device >= kEmulatedDevices) {
    return error(Code::kInvalidArgument, "emulated device: device ", device, " is not in 0..", kEmulatedDevices - 1);
  }
  current = device;
  return Status();
}
Result<int> emu_current_device() { return current; }

// ---- streams ---------------------------------------------------------------------------

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<Stream*>& registry() {  // every live stream (the default stream included)
  static std::vector<Stream*> r;
  return r;
}

class Stream {
 public:
  // kDefaultStream: the legacy default stream, of every device.
  static constexpr int kDefaultStream = -1;
  explicit Stream(int device) : device_(device), worker_([this] { loop(); }) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().push_back(this);
  }
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(registry_mutex());
      registry().erase(std::find(registry().begin(), registry().end(), this));
    }
    // An implicit synchronisation that took this stream before it left the registry may
    // still be waiting on it.
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return watchers_ == 0; });
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  int device() const { return device_; }

  // As CUDA's: a stream holds about kEmulatedStreamDepth items; past that, enqueueing
  // waits for the stream to run some (bounded by KOLO_TIMEOUT here, then it goes on).
  void enqueue(std::function<Status()> work) {
    {
      std::unique_lock<std::mutex> lock(m_);
      if (!capturing_ && queue_.size() >= kEmulatedStreamDepth && std::this_thread::get_id() != worker_.get_id()) {
        cv_.wait_for(lock, std::chrono::duration<double>(env_timeout_seconds()),
                     [&] { return queue_.size() < kEmulatedStreamDepth; });
      }
      push_locked(std::move(work));
    }
    cv_.notify_all();
  }

  // Capture: what is enqueued from now on is recorded, not run, until end_capture.
  Status begin_capture() {
    std::lock_guard<std::mutex> lock(m_);
    if (capturing_) return error(Code::kInvalidArgument, "emulated device: the stream is being captured already");
    capturing_ = true;
    invalidated_ = false;
    captured_.clear();
    captures_here.push_back(this);
    return Status();
  }
  Result<std::vector<std::function<Status()>>> end_capture() {
    std::lock_guard<std::mutex> lock(m_);
    if (!capturing_) return error(Code::kInvalidArgument, "emulated device: end_capture of a stream not being captured");
    capturing_ = false;
    auto it = std::find(captures_here.begin(), captures_here.end(), this);
    if (it != captures_here.end()) captures_here.erase(it);
    if (invalidated_) {
      captured_.clear();
      return error(Code::kInvalidArgument, "emulated device: the capture was invalidated by a call CUDA forbids "
                   "during capture (cudaErrorStreamCaptureInvalidated)");
    }
    return std::move(captured_);
  }
  bool capturing() {
    std::lock_guard<std::mutex> lock(m_);
    return capturing_;
  }
  void invalidate_capture() {
    std::lock_guard<std::mutex> lock(m_);
    if (capturing_) invalidated_ = true;
  }

  // Enqueued as one: nothing another thread enqueues lands between them (a graph launch).
  void enqueue_all(const std::vector<std::function<Status()>>& items) {
    {
      std::lock_guard<std::mutex> lock(m_);
      for (const auto& work : items) push_locked(work);
    }
    cv_.notify_all();
  }

  // Waits until everything enqueued so far has run; the stream's sticky error, if any.
  Status synchronize(const Deadline& deadline) {
    std::unique_lock<std::mutex> lock(m_);
    if (capturing_) {  // as CUDA: synchronizing a capturing stream invalidates the capture
      invalidated_ = true;
      return error(Code::kInvalidArgument, "emulated device: synchronize of a stream being captured");
    }
    return wait_for_locked(lock, enqueued_, deadline);
  }

  // For an implicit synchronisation (under the registry's lock): what has been enqueued
  // so far, the stream kept alive until release_watch.
  uint64_t watch() {
    std::lock_guard<std::mutex> lock(m_);
    ++watchers_;
    return enqueued_;
  }
  void release_watch() {
    std::lock_guard<std::mutex> lock(m_);  // notified under the lock: the destructor may be waiting to free cv_
    --watchers_;
    cv_.notify_all();
  }
  // Waits until the first `target` items have run; kTimeout with the count still pending.
  Status wait_for(uint64_t target, const Deadline& deadline) {
    std::unique_lock<std::mutex> lock(m_);
    Status s = wait_for_locked(lock, target, deadline);
    return s.code() == Code::kTimeout ? s : Status();
  }

 private:
  Status wait_for_locked(std::unique_lock<std::mutex>& lock, uint64_t target, const Deadline& deadline) {
    while (completed_ < target) {
      if (deadline.expired()) {
        return error(Code::kTimeout, "emulated device: stream still busy after the deadline (", target - completed_,
                     " items pending)");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return error_;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and drained
      std::function<Status()> work = std::move(queue_.front());
      queue_.pop_front();
      const bool failed = !error_.ok();
      lock.unlock();
      // After an error the stream is broken, as a CUDA stream is: later work is skipped.
      Status s = failed ? Status() : work();
      lock.lock();
      if (!s.ok() && error_.ok()) error_ = s;
      ++completed_;
      cv_.notify_all();
    }
  }

  // Queued to run, or recorded for a graph while capturing. Under m_.
  void push_locked(std::function<Status()> work) {
    if (capturing_) {
      captured_.push_back(std::move(work));
      return;
    }
    queue_.push_back(std::move(work));
    ++enqueued_;
  }

  const int device_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<Status()>> queue_;
  uint64_t enqueued_ = 0, completed_ = 0;
  int watchers_ = 0;  // implicit synchronisations waiting on it
  bool stop_ = false;
  bool capturing_ = false;
  bool invalidated_ = false;
  std::vector<std::function<Status()>> captured_;
  Status error_;
  std::thread worker_;  // last: started once the members above exist
};

void invalidate_captures_here() {
  for (Stream* s : captures_here) s->invalidate_capture();
}

Stream& default_stream() {
  static Stream* s = new Stream(Stream::kDefaultStream);  // never destroyed: work may be queued at exit
  return *s;
}

Stream& stream_of(void* stream) { return stream == nullptr ? default_stream() : *static_cast<Stream*>(stream); }

// Every enqueueing op first: the legacy default stream may not be used by a thread that
// captures (CUDA: cudaErrorStreamCaptureImplicit, and the capture is invalidated).
Status usable(void* stream, const char* what) {
  if (stream != nullptr || captures_here.empty()) return Status();
  invalidate_captures_here();
  return error(Code::kInvalidArgument, "emulated device: ", what, " on the legacy default stream while this thread "
               "captures a stream (CUDA: cudaErrorStreamCaptureImplicit; the capture is invalidated)");
}

// CUDA's implicit synchronisation: the call waits until the work queued on the current
// device (and the default stream) before it has run. On a GPU a deadlock here is forever;
// here it ends at KOLO_TIMEOUT with an error that says so.
Status implicit_synchronization(const char* what) {
  std::vector<std::pair<Stream*, uint64_t>> targets;
  {
    // Not held while waiting: other threads may create and destroy streams meanwhile.
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (Stream* s : registry()) {
      if (s->device() == current || s->device() == Stream::kDefaultStream) targets.emplace_back(s, s->watch());
    }
  }
  const Deadline deadline(env_timeout_seconds());
  Status result;
  for (auto& [s, target] : targets) {
    if (result.ok()) {
      Status done = s->wait_for(target, deadline);
      if (!done.ok()) {
        result = error(Code::kTimeout, "emulated device: ", what, " synchronizes the device implicitly (as CUDA's "
                       "does) and queued work did not finish within KOLO_TIMEOUT: on a GPU this is a deadlock (",
                       done.message(), ")");
      }
    }
    s->release_watch();
  }
  return result;
}

// The one thread that runs every stream's host functions, in the order they become ready.
class HostFunctionThread {
 public:
  HostFunctionThread() : thread_([this] { loop(); }) { thread_.detach(); }
  // On a stream's worker: hands fn over and waits until it has run (the stream is held).
  void run(void (*fn)(void*), void* arg) {
    Item item{fn, arg};
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(&item);
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return item.done; });  // no deadline: CUDA cannot cut a host function short either
  }

 private:
  struct Item {
    void (*fn)(void*);
    void* arg;
    bool done = false;
  };
  void loop() {
    set_in_host_function(true);
    std::unique_lock<std::mutex> lock(m_);
    while (true) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
      Item* item = queue_.front();
      queue_.pop_front();
      lock.unlock();
      item->fn(item->arg);
      lock.lock();
      item->done = true;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Item*> queue_;
  std::thread thread_;
};

HostFunctionThread& host_function_thread() {
  static HostFunctionThread* t = new HostFunctionThread();  // never destroyed, as the default stream
  return *t;
}

Status emu_stream_create(void** stream) {
  KOLO_TRY(refuse_in_host_function("stream_create"));
  *stream = new Stream(current);
  return Status();
}
Status emu_stream_destroy(void* stream) {
  if (stream == nullptr) return error(Code::kInvalidArgument, "emulated device: the default stream cannot be destroyed");
  Stream* s = static_cast<Stream*>(stream);
  Status drained = s->synchronize(Deadline(env_timeout_seconds()));
  delete s;  // joins the worker (after what is queued has run)
  return drained;
}
Status emu_stream_synchronize(void* stream, const Deadline& deadline) {
  KOLO_TRY(refuse_in_host_function("stream_synchronize"));
  KOLO_TRY(refuse_during_capture("stream_synchronize"));
  return stream_of(stream).synchronize(deadline);
}

Status emu_memcpy_async(void* dst, const void* src, size_t bytes, void* stream) {
  KOLO_TRY(usable(stream, "memcpy_async"));
  stream_of(stream).enqueue([=] {
    if (bytes > 0) std::memmove(dst, src, bytes);  // a zero-byte copy may pass null pointers
    return Status();
  });
  return Status();
}
Status emu_memset_async(void* dst, int value, size_t bytes, void* stream) {
  KOLO_TRY(usable(stream, "memset_async"));
  stream_of(stream).enqueue([=] {
    std::memset(dst, value, bytes);
    return Status();
  });
  return Status();
}

// ---- events ----------------------------------------------------------------------------

struct Event {
  std::mutex m;
  std::condition_variable cv;
  uint64_t recorded = 0;  // generation of the last record
  uint64_t reached = 0;   // the highest generation whose preceding work is done
};
// What a void* event points to. Queued records and waits hold the Event itself, so that
// destroying an event whose record or wait is still queued is safe, as CUDA allows (its
// resources go once the work is done).
struct EventHandle {
  std::shared_ptr<Event> event = std::make_shared<Event>();
};
std::shared_ptr<Event> event_of(void* event) { return static_cast<EventHandle*>(event)->event; }

Status emu_event_create(void** event) {
  *event = new EventHandle();
  return Status();
}
Status emu_event_destroy(void* event) {
  delete static_cast<EventHandle*>(event);
  return Status();
}
Status refuse_event_in_capture(void* stream, const char* what) {
  if (!stream_of(stream).capturing()) return Status();
  return error(Code::kUnsupported, "emulated device: ", what, " on a stream being captured (the emulated device "
               "captures no events)");
}

Status emu_event_record(void* event, void* stream) {
  KOLO_TRY(usable(stream, "event_record"));
  KOLO_TRY(refuse_event_in_capture(stream, "event_record"));
  std::shared_ptr<Event> e = event_of(event);
  uint64_t g;
  {
    std::lock_guard<std::mutex> lock(e->m);
    g = ++e->recorded;
  }
  stream_of(stream).enqueue([e, g] {
    {
      std::lock_guard<std::mutex> lock(e->m);
      e->reached = std::max(e->reached, g);
    }
    e->cv.notify_all();
    return Status();
  });
  return Status();
}

Status wait_generation(Event& e, uint64_t g, const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(e.m);
  while (e.reached < g) {
    if (deadline.expired()) return error(Code::kTimeout, "emulated device: event not reached before the deadline");
    e.cv.wait_for(lock, std::chrono::milliseconds(10));
  }
  return Status();
}

Status emu_stream_wait_event(void* stream, void* event) {
  KOLO_TRY(usable(stream, "stream_wait_event"));
  KOLO_TRY(refuse_event_in_capture(stream, "stream_wait_event"));
  std::shared_ptr<Event> e = event_of(event);
  uint64_t g;
  {
    std::lock_guard<std::mutex> lock(e->m);
    g = e->recorded;  // the record this wait refers to (0: never recorded, no wait)
  }
  if (g == 0) return Status();
  // A stream waiting for an event that never comes is released with an error within
  // KOLO_TIMEOUT, never held forever.
  stream_of(stream).enqueue([e, g] { return wait_generation(*e, g, Deadline(env_timeout_seconds())); });
  return Status();
}
Result<bool> emu_event_query(void* event) {
  KOLO_TRY(refuse_during_capture("event_query"));
  std::shared_ptr<Event> e = event_of(event);
  std::lock_guard<std::mutex> lock(e->m);
  return e->reached >= e->recorded;
}
Status emu_event_synchronize(void* event, const Deadline& deadline) {
  KOLO_TRY(refuse_in_host_function("event_synchronize"));
  KOLO_TRY(refuse_during_capture("event_synchronize"));
  std::shared_ptr<Event> e = event_of(event);
  uint64_t g;
  {
    std::lock_guard<std::mutex> lock(e->m);
    g = e->recorded;
  }
  return wait_generation(*e, g, deadline);
}

// The stream's worker hands fn to the process's host-function thread and waits for it.
Status emu_launch_host_func(void* stream, void (*fn)(void*), void* arg) {
  KOLO_TRY(usable(stream, "launch_host_func"));
  stream_of(stream).enqueue([fn, arg] {
    host_function_thread().run(fn, arg);
    return Status();
  });
  return Status();
}

// The stream waits on its worker, polling the word: briefly spinning (a release is often
// microseconds away), then sleeping a little longer each time.
Status emu_wait_value(void* stream, uint32_t* word, uint32_t value) {
  KOLO_TRY(usable(stream, "wait_value"));
  if (word == nullptr) return error(Code::kInvalidArgument, "emulated device: wait_value on a null word");
  stream_of(stream).enqueue([word, value] {
    const Deadline deadline(2 * env_timeout_seconds() + 5);
    for (int round = 0;; ++round) {
      const uint32_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
      if (static_cast<int32_t>(now - value) >= 0) return Status();
      if (deadline.expired()) {
        return error(Code::kTimeout, "emulated device: a stream waited on word ", static_cast<const void*>(word),
                     " for ", value, " (it holds ", now, ") past twice KOLO_TIMEOUT: nobody released it, and a GPU "
                     "stream would wait forever");
      }
      if (round < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(round < 2000 ? 20 : 200));
      }
    }
  });
  return Status();
}

Status emu_write_value(void* stream, uint32_t* word, uint32_t value) {
  KOLO_TRY(usable(stream, "write_value"));
  if (word == nullptr) return error(Code::kInvalidArgument, "emulated device: write_value to a null word");
  stream_of(stream).enqueue([word, value] {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    return Status();
  });
  return Status();
}

Status emu_launch(const Launch& launch, void* stream) {
  KOLO_TRY(usable(stream, "launch"));
  if (launch.emulated == nullptr) return error(Code::kInvalidArgument, "emulated device: a launch without an emulated body");
  if (launch.grid == 0 || launch.block == 0) {
    return error(Code::kInvalidArgument, "emulated device: launch of grid ", launch.grid, " x block ", launch.block);
  }
  // The arguments are copied now, as a kernel launch copies its parameters.
  auto args = std::make_shared<std::vector<char>>(static_cast<const char*>(launch.args),
                                                  static_cast<const char*>(launch.args) + launch.args_bytes);
  const auto body = launch.emulated;
  const unsigned grid = launch.grid, block = launch.block;
  stream_of(stream).enqueue([args, body, grid, block] {
    for (unsigned b = 0; b < grid; ++b) body(args->data(), b, grid, block);
    return Status();
  });
  return Status();
}

// ---- graphs ----------------------------------------------------------------------------

struct Graph {
  std::vector<std::function<Status()>> items;  // the captured work, arguments as captured
};

Status emu_begin_capture(void* stream) {
  if (stream == nullptr) return error(Code::kInvalidArgument, "emulated device: the default stream cannot be captured");
  return stream_of(stream).begin_capture();
}
Status emu_end_capture(void* stream, void** graph) {
  if (stream == nullptr) return error(Code::kInvalidArgument, "emulated device: the default stream is not captured");
  Result<std::vector<std::function<Status()>>> items = stream_of(stream).end_capture();
  if (!items.ok()) return items.status();
  // Instantiating waits for the device's queued work: on an H200, 8 thread-ranks whose
  // peers launched their graphs while one still instantiated deadlocked until KOLO_TIMEOUT,
  // and a host barrier between instantiation and launch cured it
  // (bench/results/2026-11-28-gpu-check-h200.md).
  Status idle = implicit_synchronization("end_capture (instantiating the graph)");
  if (!idle.ok()) return idle;
  *graph = new Graph{items.take()};
  return Status();
}
Status emu_graph_launch(void* graph, void* stream) {
  KOLO_TRY(usable(stream, "graph_launch"));
  stream_of(stream).enqueue_all(static_cast<Graph*>(graph)->items);
  return Status();
}
Status emu_graph_destroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return Status();
}

// ---- IPC -------------------------------------------------------------------------------

Status emu_ipc_export(void* ptr, IpcHandle* handle) {
  std::lock_guard<std::mutex> lock(memory_mutex());
  auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations().end() || it->second.kind != MemoryKind::kDevice || it->second.imported) {
    return error(Code::kInvalidArgument, "emulated device: ipc_export of ", ptr,
                 ", which is not the start of a device allocation of this process");
  }
  IpcWire wire{kHandleMagic, static_cast<int64_t>(::getpid()), it->second.fd, it->second.bytes, it->second.device};
  *handle = IpcHandle{};
  std::memcpy(handle->bytes, &wire, sizeof(wire));
  return Status();
}

Status emu_ipc_import(const IpcHandle& handle, void** ptr) {
  // A machine whose GPUs cannot map each other's memory (no peer access), for tests of
  // what kolo does there.
  if (env_string("KOLO_EMULATED_P2P") == "0") {
    return error(Code::kUnsupported, "emulated device: no peer access between processes (KOLO_EMULATED_P2P=0)");
  }
  IpcWire wire;
  std::memcpy(&wire, handle.bytes, sizeof(wire));
  if (wire.magic != kHandleMagic || wire.pid <= 0 || wire.fd < 0) {
    return error(Code::kInvalidArgument, "emulated device: ipc_import of a handle that no emulated device made");
  }
  const std::string path = "/proc/" + std::to_string(wire.pid) + "/fd/" + std::to_string(wire.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return error(Code::kSystem, "emulated device: cannot open the exporter's memory (", path, "): ", std::strerror(errno),
                 " (exporter gone, or another user)");
  }
  // The handle came from another process: map no more than the memory really holds (a
  // larger mapping would fault on access) and keep the device number in range.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 0 || static_cast<uint64_t>(st.st_size) < wire.bytes ||
      wire.device < 0 || wire.device >= kEmulatedDevices) {
    ::close(fd);
    return error(Code::kInvalidArgument, "emulated device: ipc_import of a handle claiming ", wire.bytes,
                 " bytes on device ", wire.device, " for memory of ", static_cast<long long>(st.st_size), " bytes");
  }
  void* p = nullptr;
  Status s = map_memfd(fd, wire.bytes, &p);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  std::lock_guard<std::mutex> lock(memory_mutex());
  allocations()[reinterpret_cast<uintptr_t>(p)] =
      Allocation{wire.bytes, MemoryKind::kDevice, static_cast<int>(wire.device), fd, true, true};
  *ptr = p;
  return Status();
}

Status emu_ipc_close(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(memory_mutex());
    auto it = allocations().find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations().end() || !it->second.imported) {
      return error(Code::kInvalidArgument, "emulated device: ipc_close of ", ptr, ", which is not an imported mapping");
    }
  }
  return release(ptr, MemoryKind::kDevice, "ipc_close");
}

Status emu_allocation_of(const void* ptr, DeviceAllocation* allocation) {
  std::lock_guard<std::mutex> lock(memory_mutex());
  auto it = find_allocation(ptr);
  if (it == allocations().end() || it->second.kind != MemoryKind::kDevice || it->second.imported) {
    return error(Code::kInvalidArgument, "emulated device: ", ptr, " is not in a device allocation of this process");
  }
  *allocation = DeviceAllocation{reinterpret_cast<void*>(it->first), it->second.bytes, it->second.id};
  return Status();
}

const DeviceOps kEmulated = {
    "emulated",
    {false, true, true},
    emu_device_count,
    emu_set_device,
    emu_current_device,
    [] { return true; },
    emu_malloc,
    emu_free,
    emu_host_alloc,
    emu_host_free,
    emu_pointer_info,
    emu_memcpy_async,
    emu_memset_async,
    emu_stream_create,
    emu_stream_destroy,
    emu_stream_synchronize,
    [](void* stream) -> Result<bool> { return stream_of(stream).capturing(); },
    emu_event_create,
    emu_event_destroy,
    emu_event_record,
    emu_stream_wait_event,
    emu_event_query,
    emu_event_synchronize,
    emu_launch_host_func,
    emu_wait_value,
    emu_write_value,
    emu_launch,
    emu_begin_capture,
    emu_end_capture,
    emu_graph_launch,
    emu_graph_destroy,
    emu_ipc_export,
    emu_ipc_import,
    emu_ipc_close,
    emu_allocation_of,
    // One machine: an emulated device is the same device in every process.
    [](int device) -> Result<std::string> {
      if (device < 0 || device >= kEmulatedDevices) return error(Code::kInvalidArgument, "emulated device: no device ", device);
      return str_cat("emulated:", device);
    },
};

}  // namespace

const DeviceOps& emulated_ops() { return kEmulated; }

}  // namespace kolo::device
