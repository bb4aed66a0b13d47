// Byte encoding of the runtime's control messages (requests sent to the coordinator and
// its responses). Everything read comes from another process over a socket, so the
// reader checks every length against what is left and turns a short or malformed
// message into an error instead of reading past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/status.h"

namespace kolo::runtime {

class WireWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void u64s(const std::vector<uint64_t>& values) {
    u64(values.size());
    for (uint64_t v : values) u64(v);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size, std::string what) : p_(data), left_(size), what_(std::move(what)) {}
  bool done() const { return left_ == 0; }
  Status u8(uint8_t& v) { return raw(&v, sizeof v); }
  Status u64(uint64_t& v) { return raw(&v, sizeof v); }
  Status i64(int64_t& v) { return raw(&v, sizeof v); }
  Status f64(double& v) { return raw(&v, sizeof v); }
  Status str(std::string& s) {
    uint64_t n = 0;
    KOLO_TRY(u64(n));
    if (n > left_) return short_message(n);
    s.assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return Status();
  }
  Status u64s(std::vector<uint64_t>& values) {
    uint64_t n = 0;
    KOLO_TRY(u64(n));
    if (n > left_ / sizeof(uint64_t)) return short_message(n * sizeof(uint64_t));
    values.resize(n);
    for (uint64_t& v : values) KOLO_TRY(u64(v));
    return Status();
  }

 private:
  Status raw(void* out, size_t n) {
    if (n > left_) return short_message(n);
    std::memcpy(out, p_, n);
    p_ += n;
    left_ -= n;
    return Status();
  }
  Status short_message(uint64_t wanted) const {
    return error(Code::kRemote, "malformed ", what_, ": a field of ", wanted, " bytes but only ", left_, " left");
  }
  const uint8_t* p_;
  size_t left_;
  std::string what_;
};

}  // namespace kolo::runtime
