#include "engine/comm_store.h"

#include <map>
#include <mutex>
#include <utility>

#include "support/log.h"
#include "transport/socket.h"

namespace kolo {
namespace {

// Servers this process hosts for its communicators, by (address, secret): one per pair
// while a communicator of this process hosts its store there (its rank 0's session holds
// it), so that rank 0 listens no longer than it needs to. Never destroyed as statics: a
// communicator may still be made while the process exits.
std::mutex& g_mutex = *new std::mutex;
std::map<std::pair<std::string, std::string>, std::weak_ptr<StoreServer>>& g_servers =
    *new std::map<std::pair<std::string, std::string>, std::weak_ptr<StoreServer>>;

// This process's server for `secret`, reachable where `ip` is (the interface through which
// this process reaches the bootstrap store, so the peers' too).
Result<std::shared_ptr<StoreServer>> hosted(const std::string& ip, const std::string& secret) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::weak_ptr<StoreServer>& slot = g_servers[{ip, secret}];
  if (std::shared_ptr<StoreServer> running = slot.lock()) return running;
  auto started = StoreServer::start(listen_host_for(ip), 0, secret);
  if (!started.ok()) return started.status().with_context(str_cat("hosting the communicator's store at ", ip, ": "));
  std::shared_ptr<StoreServer> server = started.take();
  slot = server;
  return server;
}

}  // namespace

Result<std::shared_ptr<StoreSession>> own_store(StoreSession& bootstrap, const std::string& prefix, int rank,
                                                const Deadline& deadline) {
  const std::string key = str_cat(prefix, "/store");
  HostPort address;
  auto session = std::make_shared<StoreSession>();
  if (rank == 0) {
    const std::string ip = bootstrap.client->local_ip();
    auto mine = hosted(ip, bootstrap.secret);
    if (!mine.ok()) return mine.status();
    session->server = mine.take();
    address = HostPort{ip, session->server->port()};
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
  session->client = client.take();
  session->secret = bootstrap.secret;
  log_trace(Subsys::kBootstrap, "communicator ", prefix, ": rank ", rank, " uses rank 0's store at ",
            address.to_string());
  return session;
}

Result<std::shared_ptr<StoreServer>> host_local_store(const StoreSession& own, std::string* address) {
  // Reachable where this rank reaches its communicator's store: so its host's ranks too.
  const std::string ip = own.client->local_ip();
  auto server = hosted(ip, own.secret);
  if (!server.ok()) return server.status();
  *address = HostPort{ip, server.value()->port()}.to_string();
  return server;
}

Result<std::shared_ptr<StoreSession>> connect_local_store(const std::string& address, const std::string& secret,
                                                          int rank, const Deadline& deadline) {
  auto parsed = parse_host_port(address);
  if (!parsed.ok()) return parsed.status().with_context(str_cat("rank ", rank, ": its host's store: "));
  auto client = StoreClient::connect(parsed.value(), secret, deadline);
  if (!client.ok()) {
    return client.status().with_context(str_cat("rank ", rank, ": connecting to its host's store at ", address, ": "));
  }
  auto session = std::make_shared<StoreSession>();
  session->client = client.take();
  session->secret = secret;
  return session;
}

}  // namespace kolo
