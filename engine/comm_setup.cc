// A communicator's set-up that is not the collectives: who is on which host (local and
// cross ranks) and which transports each rank allows, every host's topology (both over the
// start-up exchange's tree, bootstrap_net.h), and the network between hosts measured.
// Communicator::create (communicator.cc) calls these. And the communicators made from this
// one: split and duplicate.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "engine/comm_store.h"
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

// Each rank's entry: its host's identity, a newline, its transports (connect.h).
Result<std::vector<std::string>> Communicator::exchange_hosts(BootstrapNet& net, const Deadline& deadline) {
  Result<std::string> transports = Connections::transports_entry();
  if (!transports.ok()) return transports.status();
  auto entries = net.allgather(str_cat(host_identity(), "\n", transports.value()), deadline);
  if (!entries.ok()) return entries.status();
  host_ids_.assign(id_.size, std::string());
  transports_of_.assign(id_.size, std::string());
  for (int r = 0; r < id_.size; ++r) {
    const std::string& entry = entries.value()[r];
    const size_t cut = entry.find('\n');
    if (cut == 0 || cut == std::string::npos) return error(Code::kRemote, "rank ", r, " announced a malformed host entry");
    host_ids_[r] = entry.substr(0, cut);
    transports_of_[r] = entry.substr(cut + 1);
  }
  place_on_hosts();
  return transports_of_;
}

// A communicator made from another (a split, a dup) takes its members' hosts, transports
// and the hosts' topologies (with the network figures measured) from it: no exchange, no
// measurement again.
void Communicator::inherit(const Inherited& from) {
  const Communicator& parent = *from.parent;
  host_ids_.resize(id_.size);
  transports_of_.resize(id_.size);
  for (int r = 0; r < id_.size; ++r) {
    host_ids_[r] = parent.host_ids_[from.parent_rank[r]];
    transports_of_[r] = parent.transports_of_[from.parent_rank[r]];
  }
  place_on_hosts();
  int hosts = *std::max_element(host_of_rank_.begin(), host_of_rank_.end()) + 1;
  topology_.hosts.assign(hosts, HostTopology());
  for (int r = id_.size - 1; r >= 0; --r) {
    topology_.hosts[host_of_rank_[r]] = parent.topology_.hosts[parent.host_of_rank_[from.parent_rank[r]]];
  }
}

// From host_ids_: host_of_rank_, and the local and cross ranks.
void Communicator::place_on_hosts() {
  const std::vector<std::string>& hosts = host_ids_;
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
}

Status Communicator::exchange_topology(BootstrapNet& net, const Deadline& deadline) {
  // The first rank of each host discovers (or reads KOLO_TOPO_FILE) and publishes it, after
  // the address of the store it hosts for its host's ranks (comm_store.h) and a newline;
  // the others' entries are empty.
  std::string mine;
  std::shared_ptr<StoreServer> local_server;
  if (local_rank_ == 0) {
    Result<HostTopology> topo = this_host_topology();
    if (!topo.ok()) return topo.status();
    std::string address;
    auto server = host_local_store(*store_, &address);
    if (!server.ok()) return server.status();
    local_server = server.take();
    mine = str_cat(address, "\n", topology_to_json(topo.value()));
  }
  auto entries = net.allgather(mine, deadline);
  if (!entries.ok()) return entries.status().with_context("the hosts' topologies: ");
  int hosts = host_of_rank_.empty() ? 0 : *std::max_element(host_of_rank_.begin(), host_of_rank_.end()) + 1;
  std::vector<int> first_rank(hosts, -1);
  for (int r = id_.size - 1; r >= 0; --r) first_rank[host_of_rank_[r]] = r;
  topology_.hosts.clear();
  std::string local_address;
  for (int h = 0; h < hosts; ++h) {
    const std::string& entry = entries.value()[first_rank[h]];
    const size_t cut = entry.find('\n');
    if (cut == 0 || cut == std::string::npos) {
      return error(Code::kRemote, "rank ", first_rank[h], " announced a malformed topology entry (host ", h, ")");
    }
    if (h == host_of_rank_[id_.rank]) local_address = entry.substr(0, cut);
    // Another process wrote it: parse it as the untrusted input it is.
    Result<HostTopology> topo = topology_from_json(entry.substr(cut + 1));
    if (!topo.ok()) return topo.status().with_context(str_cat("topology of host ", h, ": "));
    topology_.hosts.push_back(topo.take());
  }
  auto local = connect_local_store(local_address, store_->secret, id_.rank, deadline);
  if (!local.ok()) return local.status();
  local_store_ = local.take();
  local_store_->server = std::move(local_server);
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

// One deadline for the whole split (the colours, the new communicator, the closing
// barrier): a failure costs KOLO_TIMEOUT once, not once per step.
Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  const Deadline deadline(timeout_seconds_);
  std::vector<int32_t> mine = {color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(id_.size));
  CollCall gather;
  gather.spec.kind = CollKind::kAllgather;
  gather.spec.count = 2;
  gather.spec.dtype = DType::kInt32;
  gather.send = mine.data();
  gather.recv = all.data();
  KOLO_TRY(run(gather));
  const uint32_t seq = split_seq_++;
  if (color < 0) return made_with_all(std::unique_ptr<Communicator>(), deadline);  // waits for the others
  std::vector<std::pair<int32_t, int>> members;  // (key, old rank)
  for (int r = 0; r < id_.size; ++r) {
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[new_rank].second != id_.rank) ++new_rank;
  CommIdentity child{str_cat(id_.prefix, "/split", seq, "/", color), new_rank, static_cast<int>(members.size())};
  Inherited from{this, {}};
  for (const auto& member : members) from.parent_rank.push_back(member.second);
  return made_with_all(create(store_, child, &deadline, &from), deadline);
}

Result<std::unique_ptr<Communicator>> Communicator::duplicate(const std::string& name) {
  const Deadline deadline(timeout_seconds_);
  Inherited from{this, {}};
  for (int r = 0; r < id_.size; ++r) from.parent_rank.push_back(r);
  return made_with_all(
      create(store_, CommIdentity{str_cat(id_.prefix, "/dup/", name), id_.rank, id_.size}, &deadline, &from), deadline);
}

// The new communicators were bootstrapped from this one's store, in its rank 0's process:
// every rank of this one (those in no new communicator too) waits here until every new one
// is made, so that rank 0 returns, and may exit, only when no one needs its store for them.
// This rank's own result stands either way; a failed barrier fails only a call that
// succeeded.
Result<std::unique_ptr<Communicator>> Communicator::made_with_all(Result<std::unique_ptr<Communicator>> made,
                                                                 const Deadline& deadline) {
  Status all = barrier(&deadline);
  if (!made.ok()) return made;
  if (!all.ok()) return all.with_context(str_cat("rank ", id_.rank, ": after the new communicator was made: "));
  return made;
}

}  // namespace kolo
