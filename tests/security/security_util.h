// Helpers shared by the security tests: a store for a "job", meshes run on threads, a
// byte check over a link, and hand-driven sockets for playing an attacker.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/bootstrap/store.h"
#include "transport/link.h"
#include "transport/socket.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo::security_test {

inline const std::string kSecret = "security-test-secret-0123456789ab";

// One job's rendezvous store on loopback.
struct Job {
  explicit Job(const std::string& secret = kSecret) : secret(secret) {
    auto started = StoreServer::start("127.0.0.1", 0, secret);
    EXPECT_TRUE(started.ok()) << started.status().to_string();
    if (started.ok()) server = started.take();
  }
  HostPort address() const { return HostPort{"127.0.0.1", server ? server->port() : uint16_t{0}}; }
  // Each rank needs its own client: a GET holds the client until the key exists.
  std::unique_ptr<StoreClient> client() const {
    auto connected = StoreClient::connect(address(), secret, Deadline(10));
    EXPECT_TRUE(connected.ok()) << connected.status().to_string();
    return connected.ok() ? connected.take() : nullptr;
  }
  std::string secret;
  std::unique_ptr<StoreServer> server;
};

using Links = std::vector<std::unique_ptr<Link>>;

// connect_tcp_mesh for one rank on a thread; join() hands back its result.
class MeshRank {
 public:
  MeshRank(const Job& job, MeshOptions options, double seconds = 10) : client_(job.client()) {
    thread_ = std::thread([this, options, seconds] {
      if (!client_) {
        result_ = error(Code::kInternal, "no store client");
        return;
      }
      result_ = connect_tcp_mesh(*client_, options, Deadline(seconds));
    });
  }
  ~MeshRank() {
    if (thread_.joinable()) thread_.join();
  }
  Result<Links>& join() {
    if (thread_.joinable()) thread_.join();
    return *result_;
  }

 private:
  std::unique_ptr<StoreClient> client_;
  std::optional<Result<Links>> result_;
  std::thread thread_;
};

inline MeshOptions mesh_options(int rank, int size, const std::string& secret = kSecret,
                                const std::string& prefix = "sec", const std::string& ip = "127.0.0.1") {
  return MeshOptions{prefix, rank, size, secret, ip, {}};
}

// Sends `text` over `from` and receives it on `to`; true when it arrived intact in time.
inline bool carries(Link& from, Link& to, const std::string& text, double seconds = 5) {
  TransferRequest sent, received;
  std::string got(text.size(), '\0');
  if (!from.post_send(7, text.data(), text.size(), &sent).ok()) return false;
  if (!to.post_recv(7, got.data(), got.size(), &received).ok()) return false;
  Deadline deadline(seconds);
  while (!(sent.done && received.done) && !deadline.expired()) {
    if (!from.progress().ok() || !to.progress().ok()) return false;
    ::usleep(1000);
  }
  return sent.done && received.done && sent.status.ok() && received.status.ok() && got == text;
}

// Reads whatever the peer sends until it closes or stays quiet for `quiet_ms`.
inline std::string read_until_quiet(int fd, int quiet_ms, bool* closed = nullptr) {
  std::string bytes;
  char chunk[4096];
  if (closed) *closed = false;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, quiet_ms) <= 0) return bytes;
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) {
      if (closed) *closed = true;
      return bytes;
    }
    bytes.append(chunk, static_cast<size_t>(n));
  }
}

// The port in "host:port" as the store holds it.
inline uint16_t port_of(const std::string& address) {
  auto parsed = parse_host_port(address);
  EXPECT_TRUE(parsed.ok()) << address;
  return parsed.ok() ? parsed.value().port : 0;
}

}  // namespace kolo::security_test
