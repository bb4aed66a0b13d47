// A communicator's set-up that is not the collectives: who is on which host (local and
// cross ranks), every host's topology, and the network between hosts measured (all
// through the communicator's store). Communicator::create (communicator.cc) calls these.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "engine/communicator.h"
#include "engine/net_calibration.h"
#include "support/env.h"
#include "support/log.h"
#include "topology/discover.h"
#include "topology/host_identity.h"
#include "topology/json_format.h"
#include "topology/render.h"

namespace kolo {
namespace {

// Discovery runs once per process: every communicator (splits too) shares the result.
Result<HostTopology> this_host_topology() {
  static std::mutex mutex;
  static std::optional<Result<HostTopology>> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached) cached.emplace(host_topology());
  return *cached;
}

}  // namespace

Status Communicator::exchange_hosts(const Deadline& deadline) {
  StoreClient& store = *store_->client;
  KOLO_TRY(store.set(str_cat(id_.prefix, "/host/", id_.rank), host_identity(), deadline));
  std::vector<std::string> hosts(id_.size);
  for (int r = 0; r < id_.size; ++r) {
    Result<std::string> host = store.get(str_cat(id_.prefix, "/host/", r), deadline);
    if (!host.ok()) return host.status().with_context(str_cat("waiting for rank ", r, " to join: "));
    if (host.value().empty()) return error(Code::kInternal, "rank ", r, " announced an empty host entry");
    hosts[r] = host.value();
  }
  // local: ranks on my host, in rank order. cross: ranks with my local rank (Horovod's meaning).
  local_rank_ = 0;
  local_size_ = 0;
  std::vector<int> local_rank_of(id_.size);
  std::map<std::string, int> seen;
  std::map<std::string, int> host_index;
  host_of_rank_.assign(id_.size, 0);
  for (int r = 0; r < id_.size; ++r) {
    host_of_rank_[r] = host_index.emplace(hosts[r], static_cast<int>(host_index.size())).first->second;
    local_rank_of[r] = seen[hosts[r]]++;
    if (hosts[r] == hosts[id_.rank]) {
      if (r < id_.rank) ++local_rank_;
      ++local_size_;
    }
  }
  cross_rank_ = 0;
  cross_size_ = 0;
  for (int r = 0; r < id_.size; ++r) {
    if (local_rank_of[r] != local_rank_) continue;
    if (r < id_.rank) ++cross_rank_;
    ++cross_size_;
  }
  return Status();
}

Status Communicator::exchange_topology(const Deadline& deadline) {
  StoreClient& store = *store_->client;
  // The first rank of each host discovers (or reads KOLO_TOPO_FILE) and publishes it.
  if (local_rank_ == 0) {
    Result<HostTopology> mine = this_host_topology();
    if (!mine.ok()) return mine.status();
    KOLO_TRY(store.set(str_cat(id_.prefix, "/topo/", host_of_rank_[id_.rank]), topology_to_json(mine.value()), deadline));
  }
  int hosts = host_of_rank_.empty() ? 0 : *std::max_element(host_of_rank_.begin(), host_of_rank_.end()) + 1;
  topology_.hosts.clear();
  for (int h = 0; h < hosts; ++h) {
    Result<std::string> text = store.get(str_cat(id_.prefix, "/topo/", h), deadline);
    if (!text.ok()) return text.status().with_context(str_cat("waiting for the topology of host ", h, ": "));
    // Another process wrote it: parse it as the untrusted input it is.
    Result<HostTopology> topo = topology_from_json(text.value());
    if (!topo.ok()) return topo.status().with_context(str_cat("topology of host ", h, ": "));
    topology_.hosts.push_back(topo.take());
  }
  if (id_.rank == 0) {
    for (int h = 0; h < hosts; ++h) {
      log_info(Subsys::kTopo, "host ", h, " ", topology_one_line(topology_.hosts[h]));
    }
  }
  return Status();
}

// Several hosts: the cost model's network figures from a measurement (net_calibration.h).
// Every rank or none: the figures go into the topology every rank plans with. (Deciding by
// this rank's cross size skipped it on a rank whose local index has no peer on the other
// hosts, hosts of 2 + 1 ranks, and that rank planned with other figures than its peers.)
Status Communicator::calibrate_network(const Deadline& deadline) {
  const bool several_hosts =
      std::any_of(host_of_rank_.begin(), host_of_rank_.end(), [](int h) { return h > 0; });
  if (!several_hosts || env_string("KOLO_NET_CALIBRATE") == "0") return Status();
  auto measured = kolo::calibrate_network(connections_->fabric(), *store_->client, id_.prefix, id_.rank,
                                          host_of_rank_, planner_params().host_net.efficiency, topology_, deadline);
  return measured.ok() ? Status() : measured.status();
}

}  // namespace kolo
