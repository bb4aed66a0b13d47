#include "topology/host_identity.h"

#include <unistd.h>

#include <fstream>

#include "support/env.h"

namespace kolo {

std::string host_identity() {
  if (env_is_set("KOLO_HOSTID")) return env_string("KOLO_HOSTID");
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);
  // Processes that see each other's pids can share memory safely (pidfds, SO_PEERCRED);
  // containers on one machine with their own pid namespaces count as different hosts.
  char pid_ns[64] = {};
  if (::readlink("/proc/self/ns/pid", pid_ns, sizeof(pid_ns) - 1) < 0) pid_ns[0] = '\0';
  // The shared-memory handshake goes through abstract Unix sockets, which belong to a
  // network namespace: processes in different ones (`ip netns exec`, test hosts) are
  // different hosts, linked by their network.
  char net_ns[64] = {};
  if (::readlink("/proc/self/ns/net", net_ns, sizeof(net_ns) - 1) < 0) net_ns[0] = '\0';
  std::string id = std::string(name) + "/" + boot_id + "/" + pid_ns + "/" + net_ns;
  return id == "///" ? "unknown-host" : id;
}

}  // namespace kolo
