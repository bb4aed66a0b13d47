#include "transport/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace kolo {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string HostPort::to_string() const {
  if (host.find(':') != std::string::npos) return str_cat("[", host, "]:", port);
  return str_cat(host, ":", port);
}

Result<HostPort> parse_host_port(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= text.size()) {
    return error(Code::kInvalidArgument, "address '", text, "' is not host:port");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::string port_text = text.substr(colon + 1);
  char* end = nullptr;
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) {
    return error(Code::kInvalidArgument, "address '", text, "' has a bad port '", port_text, "'");
  }
  return HostPort{host, static_cast<uint16_t>(port)};
}

static Status errno_status(const char* what) {
  return error(Code::kSystem, what, ": ", std::strerror(errno));
}

Result<Fd> listen_tcp(const std::string& bind_host, uint16_t port, int backlog) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* list = nullptr;
  std::string port_text = std::to_string(port);
  int rc = getaddrinfo(bind_host.empty() ? nullptr : bind_host.c_str(), port_text.c_str(), &hints, &list);
  if (rc != 0) return error(Code::kSystem, "cannot resolve '", bind_host, "': ", gai_strerror(rc));
  Status last = error(Code::kSystem, "no address to listen on for '", bind_host, "'");
  // Prefer IPv4 when binding all interfaces: loopback clients use 127.0.0.1.
  for (int pass = 0; pass < 2; ++pass) {
    for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
      if ((pass == 0) != (ai->ai_family == AF_INET)) continue;
      Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) { last = errno_status("socket"); continue; }
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) { last = errno_status("bind"); continue; }
      if (::listen(fd.get(), backlog) != 0) { last = errno_status("listen"); continue; }
      freeaddrinfo(list);
      return fd;
    }
  }
  freeaddrinfo(list);
  return last;
}

Result<uint16_t> local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return errno_status("getsockname");
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

Result<std::string> local_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return errno_status("getsockname");
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = addr.ss_family == AF_INET
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&addr)->sin_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr);
  if (::inet_ntop(addr.ss_family, raw, text, sizeof(text)) == nullptr) return errno_status("inet_ntop");
  return std::string(text);
}

Result<std::string> interface_address(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return errno_status("getifaddrs");
  std::string found;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (ifname != ifa->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
    break;
  }
  ::freeifaddrs(list);
  if (found.empty()) {
    return error(Code::kInvalidArgument, "KOLO_SOCKET_IFNAME='", ifname, "': no IPv4 interface of that name");
  }
  return found;
}

std::string listen_host_for(const std::string& host) {
  std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = ::inet_pton(AF_INET, bare.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && ::inet_pton(AF_INET6, bare.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return "";
  if (is_v4 && (ntohl(v4.s_addr) >> 24) == 127) return bare;  // all of 127/8 is this machine's
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  bool local = false;
  for (ifaddrs* ifa = list; ifa != nullptr && !local; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    if (is_v4 && ifa->ifa_addr->sa_family == AF_INET) {
      local = reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    } else if (is_v6 && ifa->ifa_addr->sa_family == AF_INET6) {
      local = std::memcmp(&reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr)->sin6_addr, &v6, sizeof v6) == 0;
    }
  }
  ::freeifaddrs(list);
  return local ? bare : "";
}

Result<Fd> connect_tcp(const HostPort& target, const Deadline& deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string port_text = std::to_string(target.port);
  Status last = error(Code::kTimeout, "connecting to ", target.to_string(), " timed out");
  int backoff_ms = 1;
  while (true) {
    addrinfo* list = nullptr;
    int rc = getaddrinfo(target.host.c_str(), port_text.c_str(), &hints, &list);
    if (rc != 0) return error(Code::kSystem, "cannot resolve '", target.host, "': ", gai_strerror(rc));
    for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
      Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
      if (!fd.valid()) continue;
      int r = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (r != 0 && errno == EINPROGRESS) {
        pollfd pfd{fd.get(), POLLOUT, 0};
        r = ::poll(&pfd, 1, deadline.remaining_ms(1000));
        int err = 0;
        socklen_t len = sizeof(err);
        if (r == 1 && ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
          r = 0;
        } else {
          errno = err != 0 ? err : ETIMEDOUT;
          r = -1;
        }
      }
      if (r == 0) {
        freeaddrinfo(list);
        Status s = set_nonblocking(fd.get(), false);
        if (!s.ok()) return s;
        return fd;
      }
      last = error(Code::kSystem, "connecting to ", target.to_string(), ": ", std::strerror(errno));
    }
    freeaddrinfo(list);
    if (deadline.expired()) return last.with_context("timed out: ");
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 100);
  }
}

Result<Fd> accept_tcp(int listen_fd, const Deadline& deadline) {
  while (true) {
    pollfd pfd{listen_fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, deadline.remaining_ms(1000));
    if (r < 0 && errno != EINTR) return errno_status("poll on listening socket");
    if (r == 1) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) return Fd(fd);
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) return errno_status("accept");
    }
    if (deadline.expired()) return error(Code::kTimeout, "no connection arrived before the deadline");
  }
}

Status set_nonblocking(int fd, bool nonblocking) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) return errno_status("fcntl(F_GETFL)");
  flags = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) return errno_status("fcntl(F_SETFL)");
  return Status();
}

Status set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) return errno_status("TCP_NODELAY");
  return Status();
}

Status write_full(int fd, const void* data, size_t size, const Deadline& deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (deadline.expired()) return error(Code::kTimeout, "send timed out with ", size, " bytes left");
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, deadline.remaining_ms(1000));
      continue;
    }
    return error(Code::kRemote, "connection lost while sending: ", std::strerror(errno));
  }
  return Status();
}

Status read_full(int fd, void* data, size_t size, const Deadline& deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return error(Code::kRemote, "connection closed by peer with ", size, " bytes unread");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (deadline.expired()) return error(Code::kTimeout, "receive timed out with ", size, " bytes left");
      pollfd pfd{fd, POLLIN, 0};
      ::poll(&pfd, 1, deadline.remaining_ms(1000));
      continue;
    }
    return error(Code::kRemote, "connection lost while receiving: ", std::strerror(errno));
  }
  return Status();
}

}  // namespace kolo
