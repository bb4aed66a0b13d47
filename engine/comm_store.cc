#include "engine/comm_store.h"

#include <map>
#include <mutex>
#include <utility>

#include "support/log.h"
#include "transport/socket.h"

namespace kolo {
namespace {

// Servers this process hosts for its communicators, by (address, secret). Never destroyed
// as statics: a communicator may still use one while the process exits; the server
// threads end in the store's own exit handler (store_server.cc).
std::mutex& g_mutex = *new std::mutex;
std::map<std::pair<std::string, std::string>, std::unique_ptr<StoreServer>>& g_servers =
    *new std::map<std::pair<std::string, std::string>, std::unique_ptr<StoreServer>>;

// The address of this process's server for `secret`, reachable where `ip` is (the
// interface through which this process reaches the bootstrap store, so the peers' too).
Result<HostPort> hosted(const std::string& ip, const std::string& secret) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::unique_ptr<StoreServer>& server = g_servers[{ip, secret}];
  if (!server) {
    auto started = StoreServer::start(listen_host_for(ip), 0, secret);
    if (!started.ok()) return started.status().with_context(str_cat("hosting the communicator's store at ", ip, ": "));
    server = started.take();
  }
  return HostPort{ip, server->port()};
}

}  // namespace

Result<std::shared_ptr<StoreSession>> own_store(StoreSession& bootstrap, const std::string& prefix, int rank,
                                                const Deadline& deadline) {
  const std::string key = str_cat(prefix, "/store");
  HostPort address;
  if (rank == 0) {
    auto mine = hosted(bootstrap.client->local_ip(), bootstrap.secret);
    if (!mine.ok()) return mine.status();
    address = mine.value();
    KOLO_TRY(bootstrap.client->set(key, address.to_string(), deadline));
  } else {
    Result<std::string> text = bootstrap.client->get(key, deadline);
    if (!text.ok()) return text.status().with_context(str_cat("rank ", rank, ": waiting for rank 0's store: "));
    auto parsed = parse_host_port(text.value());
    if (!parsed.ok()) return parsed.status().with_context(str_cat("rank ", rank, ": rank 0's store: "));
    address = parsed.value();
  }
  auto client = StoreClient::connect(address, bootstrap.secret, deadline);
  if (!client.ok()) {
    return client.status().with_context(str_cat("rank ", rank, ": connecting to rank 0's store at ",
                                                address.to_string(), ": "));
  }
  auto session = std::make_shared<StoreSession>();
  session->client = client.take();
  session->secret = bootstrap.secret;
  log_trace(Subsys::kBootstrap, "communicator ", prefix, ": rank ", rank, " uses rank 0's store at ",
            address.to_string());
  return session;
}

}  // namespace kolo
