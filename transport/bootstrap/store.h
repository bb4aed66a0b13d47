// The rendezvous store: a small authenticated key-value server that ranks use at start-up
// (address exchange, barriers, communicator splits). kolorun hosts it, or rank 0 does.
//
// Every message is authenticated with HMAC-SHA256 under the per-job secret; a connection
// that fails authentication is dropped and logged. An empty secret runs unauthenticated
// (KOLO_INSECURE=1), with a warning.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/socket.h"

namespace kolo {

// Largest key and value the store accepts; longer ones are refused on both sides.
constexpr size_t kStoreMaxKeyBytes = 1024;
constexpr size_t kStoreMaxValueBytes = 16u << 20;

class StoreServer {
 public:
  // Listens on bind_host:port (port 0 = any free port) and serves on a background thread.
  // `secret` is the raw key (bytes, not hex); empty = unauthenticated.
  static Result<std::unique_ptr<StoreServer>> start(const std::string& bind_host, uint16_t port,
                                                    const std::string& secret);
  virtual ~StoreServer() = default;  // stops the thread and closes every connection
  virtual uint16_t port() const = 0;
  // Connections dropped because they failed authentication (for tests and logs).
  virtual uint64_t rejected_connections() const = 0;
};

class StoreClient {
 public:
  // Connects, retrying until the deadline (the server may not be up yet), and
  // authenticates. `secret` as for StoreServer::start.
  static Result<std::unique_ptr<StoreClient>> connect(const HostPort& server, const std::string& secret,
                                                      const Deadline& deadline);
  virtual ~StoreClient() = default;

  // All calls are thread-safe and take a deadline; on kTimeout or kRemote the connection
  // is closed and later calls fail with kRemote.
  virtual Status set(const std::string& key, const std::string& value, const Deadline& deadline) = 0;
  // Waits until the key exists, then returns its value.
  virtual Result<std::string> get(const std::string& key, const Deadline& deadline) = 0;
  // The key's value if it exists now; nullopt if not (never waits for it).
  virtual Result<std::optional<std::string>> peek(const std::string& key, const Deadline& deadline) = 0;
  // A set whose key lives only as long as this client's connection: the server erases it
  // when the connection closes (the process exited or was killed). Liveness for elastic jobs.
  virtual Status set_owned(const std::string& key, const std::string& value, const Deadline& deadline) = 0;
  // Atomically adds delta to the integer stored at key (missing = 0); returns the new value.
  virtual Result<int64_t> add(const std::string& key, int64_t delta, const Deadline& deadline) = 0;
  // Waits until every key exists.
  virtual Status wait(const std::vector<std::string>& keys, const Deadline& deadline) = 0;
  // Waits until the keys prefix+"0" .. prefix+(count-1) exist, and returns their values in
  // that order: a communicator's exchanges at start-up, one request per rank instead of one
  // per rank and peer. When the deadline is near and some are still missing, the server
  // answers kTimeout and `missing` (if given) gets their indices, so that the caller can
  // name the ranks that never came; the connection stays usable.
  Result<std::vector<std::string>> gather(const std::string& prefix, int count, const Deadline& deadline,
                                          std::vector<int>* missing = nullptr) {
    return gather_range(prefix, 0, count, deadline, missing);
  }
  // The same for prefix+first .. prefix+(first+count-1): with count 1, a GET that times out
  // as an answer (the connection stays usable) rather than by closing the connection.
  virtual Result<std::vector<std::string>> gather_range(const std::string& prefix, int first, int count,
                                                        const Deadline& deadline, std::vector<int>* missing = nullptr) = 0;
  // gather() with the server's wait capped at `wait_s`: one slice of a longer wait whose
  // caller checks something between slices. Past it, kTimeout and `missing`, the connection
  // usable; the reply has until `deadline` to come.
  virtual Result<std::vector<std::string>> gather_slice(const std::string& prefix, int count, double wait_s,
                                                        const Deadline& deadline, std::vector<int>* missing) = 0;
  // Which of the keys prefix+"0" .. prefix+(count-1) do not exist (indices, ascending),
  // once they all exist or `wait_s` has passed at the server (0: at once): a question about
  // who is there (live keys after a failure), not a wait for them.
  virtual Result<std::vector<int>> absent(const std::string& prefix, int count, double wait_s,
                                          const Deadline& deadline) = 0;
  // Returns once `count` callers have entered the barrier called `name`.
  virtual Status barrier(const std::string& name, int count, const Deadline& deadline) = 0;
  // The local socket's IP address: the interface that reaches the store.
  virtual std::string local_ip() const = 0;
};

}  // namespace kolo
