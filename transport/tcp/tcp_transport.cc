#include "transport/tcp/tcp_transport.h"

#include "support/env.h"
#include "transport/socket.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo {
namespace {

Result<std::string> listen_address(const StoreClient& client) {
  std::string ifname = env_string("KOLO_SOCKET_IFNAME");
  if (!ifname.empty()) return interface_address(ifname);
  return client.local_ip();  // the interface that reaches the store reaches the peers too
}

// KOLO_SOCKET_IFNAME is looked up when connecting.
Status check_env() {
  const std::string lazy = env_string("KOLO_LAZY_CONNECT");
  if (lazy != "0" && lazy != "1") return error(Code::kInvalidArgument, "KOLO_LAZY_CONNECT='", lazy, "' is not 0 or 1");
  return Status();
}

bool reachable(const TransportEnv&, int, int) { return true; }

Status connect(const TransportEnv& env, const std::vector<int>& peers, const Deadline& deadline,
               TransportOutput* out) {
  Result<std::string> ip = listen_address(*env.store);
  if (!ip.ok()) return ip.status();
  std::vector<bool> over_tcp(env.size, false);
  for (int r : peers) over_tcp[r] = true;
  MeshOptions options{env.prefix, env.rank, env.size, env.secret, ip.value(), over_tcp};
  if (env_string("KOLO_LAZY_CONNECT") == "1") {
    // Each link is made when a call first needs it (Fabric::connect).
    options.any_direction = true;
    auto maker = TcpLinkMaker::start(*env.store, options, deadline);
    if (!maker.ok()) return maker.status();
    out->maker = maker.take();
    return Status();
  }
  auto mesh = connect_tcp_mesh(*env.store, options, deadline);
  if (!mesh.ok()) return mesh.status();
  std::vector<std::unique_ptr<Link>> links = mesh.take();
  for (int r : peers) out->links[r] = std::move(links[r]);
  return Status();
}

}  // namespace

Result<std::unique_ptr<LinkMaker>> tcp_bootstrap_maker(const CommSite& site, const Deadline& deadline) {
  Result<std::string> ip = listen_address(*site.store);
  if (!ip.ok()) return ip.status();
  MeshOptions options{site.prefix, site.rank, site.size, site.secret, ip.value(), {}};
  options.any_direction = true;
  auto maker = TcpLinkMaker::start(*site.store, options, deadline);
  if (!maker.ok()) return maker.status().with_context("the start-up exchange's links: ");
  return std::unique_ptr<LinkMaker>(maker.take());
}

TransportRow tcp_transport_row() { return TransportRow{"tcp", check_env, reachable, connect}; }

}  // namespace kolo
