// Small POSIX socket helpers shared by the bootstrap store and the TCP transport.
// Every blocking helper takes a Deadline.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "support/clock.h"
#include "support/status.h"

namespace kolo {

// Owns a file descriptor; closes it once.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string to_string() const;
};

// Parses "host:port" (also "[v6]:port"); errors name the text.
Result<HostPort> parse_host_port(const std::string& text);

// Binds a listening TCP socket on `bind_host` (empty = all interfaces), port 0 = any. The
// backlog is the kernel's most (net.core.somaxconn): a store or a leader is connected to by
// hundreds of ranks at once, and a connect that overflows a backlog of 128 waits a second
// for its SYN to be sent again (seen as 1 s steps at 256 ranks).
Result<Fd> listen_tcp(const std::string& bind_host, uint16_t port, int backlog = SOMAXCONN);
// The port a bound socket listens on.
Result<uint16_t> local_port(int fd);
// The local IP address of a connected socket (which interface reaches the peer).
Result<std::string> local_address(int fd);
// IPv4 address of a named interface (KOLO_SOCKET_IFNAME).
Result<std::string> interface_address(const std::string& ifname);
// Where a server that peers reach as `host` should listen: `host` itself when it is a
// literal address of an interface of this machine (so nothing listens on the others),
// "" (all interfaces) otherwise. A host name is not narrowed: it may resolve to one
// address here (Debian maps the machine's own name to 127.0.1.1) and another elsewhere.
std::string listen_host_for(const std::string& host);

// Connects, retrying refused connections until the deadline (the peer may not listen yet).
Result<Fd> connect_tcp(const HostPort& target, const Deadline& deadline);
// Accepts one connection, waiting at most until the deadline.
Result<Fd> accept_tcp(int listen_fd, const Deadline& deadline);

Status set_nonblocking(int fd, bool nonblocking);
Status set_nodelay(int fd);

// Blocking-with-deadline full transfers on a (possibly non-blocking) socket. A closed
// connection is Code::kRemote.
Status write_full(int fd, const void* data, size_t size, const Deadline& deadline);
Status read_full(int fd, void* data, size_t size, const Deadline& deadline);

}  // namespace kolo
