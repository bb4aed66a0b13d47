// Which device runtime this process uses (KOLO_DEVICE), decided once; and the "none"
// backend, which refuses everything but the questions.
#include "support/device/device.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "support/env.h"
#include "support/log.h"

namespace kolo::device {
namespace {

Status why_none();

Status no_device() { return why_none(); }
template <class... A>
Status refuse(A...) {
  return no_device();
}

int no_devices() { return 0; }
Result<int> no_current() { return no_device(); }
PointerInfo all_host(const void*) { return PointerInfo{}; }
Result<bool> no_query(void*) { return no_device(); }

const DeviceOps kNone = {
    "none",
    {false, false, false},
    no_devices,
    refuse<int>,
    no_current,
    [] { return false; },
    refuse<void**, size_t>,
    refuse<void*>,
    refuse<void**, size_t>,
    refuse<void*>,
    all_host,
    refuse<void*, const void*, size_t, void*>,
    refuse<void*, int, size_t, void*>,
    refuse<void**>,
    refuse<void*>,
    [](void*, const Deadline&) { return no_device(); },
    [](void*) -> Result<bool> { return no_device(); },
    refuse<void**>,
    refuse<void*>,
    refuse<void*, void*>,
    refuse<void*, void*>,
    no_query,
    [](void*, const Deadline&) { return no_device(); },
    [](void*, void (*)(void*), void*) { return no_device(); },
    refuse<void*, uint32_t*, uint32_t>,
    refuse<void*, uint32_t*, uint32_t>,
    [](const Launch&, void*) { return no_device(); },
    refuse<void*>,
    refuse<void*, void**>,
    refuse<void*, void*>,
    refuse<void*>,
    refuse<void*, IpcHandle*>,
    [](const IpcHandle&, void**) { return no_device(); },
    refuse<void*>,
    refuse<const void*, DeviceAllocation*>,
    [](int) -> Result<std::string> { return no_device(); },
};

struct Choice {
  const DeviceOps* ops = &kNone;
  Status status;  // why there is no device (for the none backend's errors)
};

Choice choose() {
  const std::string want = env_string("KOLO_DEVICE");
  Choice c;
  if (want == "none") {
    c.status = error(Code::kUnsupported, "no device runtime: KOLO_DEVICE=none");
  } else if (want == "emulated") {
    c.ops = &emulated_ops();
  } else if (want == "cuda" || want == "auto" || want.empty()) {
    if (cuda_ops() != nullptr && cuda_present()) {
      c.ops = cuda_ops();
    } else if (want == "cuda") {
      c.status = error(Code::kUnsupported, "KOLO_DEVICE=cuda but ",
                       cuda_ops() == nullptr ? "this kolo was built without CUDA (no nvcc at build time)"
                                             : "no CUDA driver or GPU was found on this machine");
      log_warn(Subsys::kInit, c.status.message());
    } else {
      c.status = error(Code::kUnsupported, "no GPU: ",
                       cuda_ops() == nullptr ? "this kolo was built without CUDA" : "no CUDA driver or GPU was found",
                       " (KOLO_DEVICE=emulated gives a CPU device)");
    }
  } else {
    // Every device call's error; not logged: env_check_all fails the communicator's init
    // with it, so it would be said twice.
    c.status = error(Code::kInvalidArgument, "KOLO_DEVICE='", want, "' is not auto, cuda, emulated or none");
  }
  if (c.ops != &kNone) log_info(Subsys::kInit, "device runtime: ", c.ops->name);
  return c;
}

const Choice& chosen() {
  static const Choice choice = choose();
  return choice;
}

Status why_none() { return chosen().status; }

}  // namespace

const DeviceOps& runtime() { return *chosen().ops; }

namespace {
thread_local bool host_function_running = false;
}  // namespace

bool in_host_function() { return host_function_running; }
void set_in_host_function(bool in) { host_function_running = in; }

Status assert_may_block(const char* what) {
  if (!host_function_running) return Status();
#ifndef NDEBUG
  std::fprintf(stderr, "kolo: %s would wait inside a device host function (it stalls every stream's host "
               "functions of the process)\n", what);
  std::abort();
#endif
  return error(Code::kInternal, what, " would wait inside a device host function, which stalls every stream's host "
               "functions of the process");
}
const DeviceOps& none_ops() { return kNone; }

ScopedDevice::ScopedDevice(int device) {
  if (device < 0) return;
  const DeviceOps& ops = runtime();
  Result<int> current = ops.current_device();
  if (current.ok() && current.value() == device) return;
  status_ = ops.set_device(device);
  if (status_.ok() && current.ok()) previous_ = current.value();
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) (void)runtime().set_device(previous_);
}

}  // namespace kolo::device
