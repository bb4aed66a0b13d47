#include "support/host_rates.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "support/clock.h"

namespace kolo {
namespace {

constexpr size_t kCopyBytes = 4 << 20;

// The last-level cache of the CPU we run on, as sysfs describes it (what lscpu shows). glibc's
// sysconf(_SC_LEVEL3_CACHE_SIZE) can report the whole package's L3 on a VM (384 MiB for a
// 32 MiB slice), so it is only the fallback.
double cache_bytes() {
  double best = 0;
  int best_level = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size) || type == "Instruction") continue;
    char* end = nullptr;
    double bytes = std::strtod(size.c_str(), &end);
    if (end != nullptr && (*end == 'K' || *end == 'k')) bytes *= 1024;
    if (end != nullptr && (*end == 'M' || *end == 'm')) bytes *= 1024 * 1024;
    if (bytes > 0 && level > best_level) {
      best = bytes;
      best_level = level;
    }
  }
  if (best > 0) return best;
  long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? static_cast<double>(bytes) : 8.0 * (1 << 20);
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

double measure_copy_gbs() {
  std::unique_ptr<char, FreeDeleter> src(static_cast<char*>(std::aligned_alloc(64, kCopyBytes)));
  std::unique_ptr<char, FreeDeleter> dst(static_cast<char*>(std::aligned_alloc(64, kCopyBytes)));
  if (!src || !dst) return 0;
  std::memset(src.get(), 1, kCopyBytes);  // first touch: page faults stay out of the timing
  std::memset(dst.get(), 0, kCopyBytes);
  // The best of a few copies: the rate the machine can give, not a moment it was busy.
  double best = 1e30;
  const double until = now_seconds() + 2e-3;
  for (int rep = 0; rep < 20 && (rep < 3 || now_seconds() < until); ++rep) {
    const double t0 = now_seconds();
    std::memcpy(dst.get(), src.get(), kCopyBytes);
    best = std::min(best, now_seconds() - t0);
    src.get()[rep] = dst.get()[kCopyBytes - 1 - rep];  // keep the copies observable
  }
  return best > 0 ? kCopyBytes / best / 1e9 : 0;
}

}  // namespace

const HostRates& host_rates() {
  static const HostRates rates = [] {
    HostRates r;
    r.copy_gbs = measure_copy_gbs();
    r.cache_bytes = cache_bytes();
    return r;
  }();
  return rates;
}

}  // namespace kolo
