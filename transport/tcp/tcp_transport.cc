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

Status check_env() { return Status(); }  // KOLO_SOCKET_IFNAME is looked up when connecting

bool reachable(const TransportEnv&, int, int) { return true; }

Status connect(const TransportEnv& env, const std::vector<int>& peers, const Deadline& deadline,
               TransportOutput* out) {
  Result<std::string> ip = listen_address(*env.store);
  if (!ip.ok()) return ip.status();
  std::vector<bool> over_tcp(env.size, false);
  for (int r : peers) over_tcp[r] = true;
  MeshOptions options{env.prefix, env.rank, env.size, env.secret, ip.value(), over_tcp};
  auto mesh = connect_tcp_mesh(*env.store, options, deadline);
  if (!mesh.ok()) return mesh.status();
  std::vector<std::unique_ptr<Link>> links = mesh.take();
  for (int r : peers) out->links[r] = std::move(links[r]);
  return Status();
}

}  // namespace

TransportRow tcp_transport_row() { return TransportRow{"tcp", check_env, reachable, connect}; }

}  // namespace kolo
