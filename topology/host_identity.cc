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
  std::string id = std::string(name) + "/" + boot_id;
  return id == "/" ? "unknown-host" : id;
}

}  // namespace kolo
