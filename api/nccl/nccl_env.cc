// NCCL's environment as kolo's: NCCL_DEBUG becomes KOLO_DEBUG (unless that is set), the
// NCCL_* tuning variables kolo has no use for are named once at INFO level, and the guard
// against kolo's own NCCL backend loading this library.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/nccl/nccl_internal.h"
#include "support/env.h"

// Marks this libnccl.so.2 as kolo's drop-in: kolo's NCCL backend (KOLO_BACKEND=nccl
// dlopens libnccl.so.2) can look this symbol up and refuse to run on top of itself.
extern "C" {
__attribute__((visibility("default"))) int kolo_nccl_dropin = 1;
}

namespace kolo_nccl {
namespace {

// NCCL variables that tune what kolo decides itself (its planner, its transports).
const char* const kIgnored[] = {
    "NCCL_SOCKET_IFNAME",  "NCCL_ALGO",        "NCCL_PROTO",         "NCCL_IB_HCA",     "NCCL_IB_DISABLE",
    "NCCL_P2P_DISABLE",    "NCCL_SHM_DISABLE", "NCCL_NET",           "NCCL_NTHREADS",   "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",  "NCCL_BUFFSIZE",    "NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL",  "NCCL_CROSS_NIC",
    "NCCL_COLLNET_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_TOPO_FILE",     "NCCL_GRAPH_FILE", "NCCL_DEBUG_SUBSYS",
    "NCCL_DEBUG_FILE",     "NCCL_LAUNCH_MODE",
};

void set_up() {
  const char* nccl_debug = std::getenv("NCCL_DEBUG");
  std::string level = nccl_debug != nullptr ? nccl_debug : "";
  for (char& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // kolo reads KOLO_DEBUG lazily, at its first log line: setting it here, before this
  // library's first kolo call, takes effect. An explicit KOLO_DEBUG wins. kolo's C API has
  // no other way to take a log level, so this is a setenv: see map_environment_at_load for
  // when it runs.
  if (!kolo::env_is_set("KOLO_DEBUG") && !level.empty()) {
    if (level == "WARN" || level == "INFO" || level == "TRACE") {
      setenv("KOLO_DEBUG", level.c_str(), 1);  // unset or empty: empty counts as unset
    } else if (level == "VERSION") {
      std::fprintf(stderr, "kolo-nccl: NCCL API %d.%d.%d on kolo %d\n", KOLO_NCCL_MAJOR, KOLO_NCCL_MINOR,
                   KOLO_NCCL_PATCH, kolo_version());
    }
  }
  const std::string effective = kolo::env_string("KOLO_DEBUG");  // "INFO" for info too
  if (effective == "INFO" || effective == "TRACE") {
    std::string set;
    for (const char* name : kIgnored) {
      if (std::getenv(name) != nullptr) set += std::string(set.empty() ? "" : " ") + name;
    }
    if (!set.empty()) {
      std::fprintf(stderr,
                   "kolo-nccl INFO: ignoring %s (kolo's planner and transports decide; see KOLO_* in "
                   "`kolorun --help-env`)\n",
                   set.c_str());
    }
  }
}

}  // namespace

void ensure_environment() {
  // A function-local static: initialized once, thread-safely, as std::call_once would
  // (which is not used: its helper template would be exported from this library).
  static const bool done = (set_up(), true);
  (void)done;
}

namespace {

// setenv is not safe while another thread calls getenv (glibc may move the environment
// under it). So the mapping runs when the library is loaded, the earliest point it has:
// before main for a program linked with -lnccl, while it is usually one thread; at dlopen
// for one that loads NCCL itself, still before any NCCL call can come. The first NCCL
// calls (ncclGetUniqueId, ncclCommInitRank*, ncclCommInitAll, ncclMemAlloc, ncclGetVersion)
// call ensure_environment too, which does nothing once this has run; either way kolo,
// which reads its environment at its first call, sees the mapped KOLO_DEBUG.
__attribute__((constructor)) void map_environment_at_load() { ensure_environment(); }

}  // namespace

ncclResult_t check_not_backend(const char* function) {
  if (kolo::env_string("KOLO_BACKEND") == "nccl") {
    return fail(ncclInvalidUsage,
                words(function,
                      ": KOLO_BACKEND=nccl is set, but this libnccl.so.2 is kolo's own drop-in: "
                      "kolo's NCCL backend would load it and call itself. Unset KOLO_BACKEND (or set "
                      "it to kolo) to run on the drop-in, or run the program on NVIDIA's libnccl.so.2"));
  }
  return ncclSuccess;
}

}  // namespace kolo_nccl
