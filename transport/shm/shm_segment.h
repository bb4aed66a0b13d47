// Shared memory that leaves nothing behind: an anonymous memfd (never a name in /dev/shm),
// handed from the process that creates it to the others of the same host over an abstract
// Unix socket (SCM_RIGHTS). Only processes of this user, with the pids the store announced,
// receive it. When the last process unmaps it, the kernel frees it, even after a kill -9.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/socket.h"

namespace kolo::shm {

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  Mapping(Mapping&& other) noexcept { *this = std::move(other); }
  Mapping& operator=(Mapping&& other) noexcept;
  ~Mapping();
  char* data() const { return static_cast<char*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A new zero-filled memfd of `bytes`, mode 0600, mapped shared.
Result<Mapping> create_shared_memory(size_t bytes, Fd* memfd);
Result<Mapping> map_shared_memory(int memfd, size_t bytes);

// The giving side: an abstract-namespace socket with a random name.
class FdOffer {
 public:
  static Result<FdOffer> open();
  const std::string& name() const { return name_; }
  // Hands `fd` to each expected pid once; anyone else is turned away. Returns when all got it.
  Status serve(int fd, const std::vector<pid_t>& expected, const Deadline& deadline);

 private:
  Fd listener_;
  std::string name_;
};

// The receiving side.
Result<Fd> take_fd(const std::string& offer_name, const Deadline& deadline);

}  // namespace kolo::shm
