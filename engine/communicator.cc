#include "engine/communicator.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <sstream>

#include "engine/algorithms.h"
#include "engine/host_executor.h"
#include "support/env.h"
#include "support/log.h"
#include "topology/discover.h"
#include "topology/host_identity.h"
#include "topology/json_format.h"
#include "topology/render.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo {
namespace {

constexpr uint64_t kPointToPointTagBit = uint64_t{1} << 63;

Result<std::string> listen_address(const StoreClient& client) {
  std::string ifname = env_string("KOLO_SOCKET_IFNAME");
  if (!ifname.empty()) return interface_address(ifname);
  return client.local_ip();  // the interface that reaches the store reaches the peers too
}

Status check_transports() {
  std::string allowed = env_string("KOLO_TRANSPORTS");
  if (allowed.empty() || allowed.find("tcp") != std::string::npos) return Status();
  return error(Code::kUnsupported, "KOLO_TRANSPORTS='", allowed, "' allows no transport built into kolo (available: tcp)");
}

// The plan cache key: everything of the spec a schedule depends on (chunk size and
// KOLO_ALGO are fixed per communicator).
std::string spec_key(const CollSpec& spec) {
  std::ostringstream key;
  key << static_cast<int>(spec.kind) << '/' << spec.count << '/' << static_cast<int>(spec.dtype) << '/'
      << static_cast<int>(spec.op) << '/' << spec.root << '/' << spec.peer << '/' << spec.in_place << spec.prescaled
      << spec.postscaled << '/' << static_cast<int>(spec.algorithm);
  for (size_t c : spec.counts) key << ',' << c;
  key << '/';
  for (size_t d : spec.displs) key << ',' << d;
  return key.str();
}

// Discovery runs once per process: every communicator (splits too) shares the result.
Result<HostTopology> this_host_topology() {
  static std::mutex mutex;
  static std::optional<Result<HostTopology>> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cached) cached.emplace(host_topology());
  return *cached;
}

bool is_empty(const CollSpec& spec) {
  if (spec.kind == CollKind::kBarrier) return false;
  if (spec.kind == CollKind::kAllgatherv) {
    for (size_t c : spec.counts) {
      if (c != 0) return false;
    }
    return true;
  }
  return spec.count == 0;
}

}  // namespace

Result<std::unique_ptr<Communicator>> Communicator::create(std::shared_ptr<StoreSession> store, CommIdentity id) {
  KOLO_TRY(check_transports());
  std::unique_ptr<Communicator> comm(new Communicator(std::move(store), std::move(id)));
  KOLO_TRY(comm->read_environment());
  Deadline deadline(comm->timeout_seconds_);
  KOLO_TRY(comm->exchange_hosts(deadline));
  KOLO_TRY(comm->exchange_topology(deadline));
  KOLO_TRY(comm->connect(deadline));
  comm->send_seq_.assign(comm->size(), 0);
  comm->recv_seq_.assign(comm->size(), 0);
  log_info(Subsys::kInit, "communicator ", comm->id_.prefix, ": rank ", comm->rank(), " of ", comm->size(),
           ", local ", comm->local_rank_, "/", comm->local_size_, ", cross ", comm->cross_rank_, "/",
           comm->cross_size_, ", transport tcp");
  return comm;
}

Status Communicator::read_environment() {
  Result<long long> chunk = env_int("KOLO_CHUNK_BYTES");
  if (!chunk.ok()) return chunk.status();
  if (chunk.value() < 1024) {
    return error(Code::kInvalidArgument, "KOLO_CHUNK_BYTES=", chunk.value(), " is below the minimum of 1024");
  }
  chunk_bytes_ = static_cast<size_t>(chunk.value());
  Result<Algorithm> algorithm = parse_algorithm_name(env_string("KOLO_ALGO"));
  if (!algorithm.ok()) return algorithm.status();
  forced_algorithm_ = algorithm.value();
  timeout_seconds_ = env_timeout_seconds();
  return Status();
}

Communicator::~Communicator() {
  if (fabric_) fabric_->shutdown();
}

Status Communicator::exchange_hosts(const Deadline& deadline) {
  StoreClient& store = *store_->client;
  KOLO_TRY(store.set(str_cat(id_.prefix, "/host/", id_.rank), host_identity(), deadline));
  std::vector<std::string> hosts(id_.size);
  for (int r = 0; r < id_.size; ++r) {
    Result<std::string> host = store.get(str_cat(id_.prefix, "/host/", r), deadline);
    if (!host.ok()) return host.status().with_context(str_cat("waiting for rank ", r, " to join: "));
    hosts[r] = host.take();
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

Status Communicator::connect(const Deadline& deadline) {
  Result<std::string> ip = listen_address(*store_->client);
  if (!ip.ok()) return ip.status();
  MeshOptions options{id_.prefix, id_.rank, id_.size, store_->secret, ip.value()};
  auto links = connect_tcp_mesh(*store_->client, options, deadline);
  if (!links.ok()) return links.status();
  fabric_ = std::make_unique<Fabric>(id_.rank, id_.size, links.take());
  return Status();
}

const Schedule& Communicator::schedule_for(const CollSpec& spec) {
  std::string key = spec_key(spec);
  auto it = schedules_.find(key);
  if (it != schedules_.end()) return it->second;
  PlanContext ctx{id_.rank, id_.size, chunk_bytes_, forced_algorithm_, &topology_, &host_of_rank_};
  Schedule schedule = build_schedule(spec, ctx);
  log_info(Subsys::kPlan, coll_name(spec.kind), " of ", spec.bytes(), " B on ", id_.size, " ranks: ",
           schedule.algorithm, " (", schedule.steps.size(), " steps)");
  log_trace(Subsys::kPlan, schedule_to_string(schedule));
  if (schedules_.size() > 4096) schedules_.clear();  // bound the cache for varying sizes
  return schedules_.emplace(key, std::move(schedule)).first->second;
}

uint64_t Communicator::next_tag_base(const CollSpec& spec) {
  if (spec.kind == CollKind::kSend) return kPointToPointTagBit | uint64_t{send_seq_[spec.peer]++} << 32;
  if (spec.kind == CollKind::kRecv) return kPointToPointTagBit | uint64_t{recv_seq_[spec.peer]++} << 32;
  return uint64_t{collective_seq_++} << 32;
}

Status Communicator::fail(Status status) {
  if (failed_.ok()) failed_ = status;
  log_warn(Subsys::kExec, status.message());
  // Closing our links makes peers that wait on us fail now instead of at their deadline.
  fabric_->shutdown();
  return status;
}

Status Communicator::run(const CollCall& call) { return run_group({call}); }

Status Communicator::run_group(const std::vector<CollCall>& calls) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  if (!failed_.ok()) {
    return error(Code::kAborted, "communicator failed earlier and cannot be used (", failed_.message(), ")");
  }
  if (fabric_->aborted()) return fail(error(Code::kAborted, "communicator was aborted"));
  Schedule combined;
  combined.calls = 0;
  std::vector<CallBinding> bindings;
  for (const CollCall& original : calls) {
    if (is_empty(original.spec)) continue;
    CollCall call = original;
    if (call.spec.op == ReduceOp::kAvg) {
      call.spec.op = ReduceOp::kSum;
      call.postscale.divisor *= id_.size;
    }
    call.spec.prescaled = !call.prescale.identity();
    call.spec.postscaled = !call.postscale.identity();
    append_schedule(combined, schedule_for(call.spec));
    bindings.push_back(CallBinding{call.send, call.recv, call.prescale, call.postscale, next_tag_base(call.spec)});
  }
  if (bindings.empty()) return Status();
  if (scratch_.size() < combined.scratch_bytes) scratch_.resize(combined.scratch_bytes);
  Deadline deadline(timeout_seconds_);
  Status status = execute_schedule(combined, *fabric_, bindings, scratch_.data(), deadline);
  if (!status.ok()) return fail(status);
  return Status();
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
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
  if (color < 0) return std::unique_ptr<Communicator>();
  std::vector<std::pair<int32_t, int>> members;  // (key, old rank)
  for (int r = 0; r < id_.size; ++r) {
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[new_rank].second != id_.rank) ++new_rank;
  CommIdentity child{str_cat(id_.prefix, "/split", seq, "/", color), new_rank, static_cast<int>(members.size())};
  return create(store_, child);
}

Result<std::unique_ptr<Communicator>> Communicator::duplicate(const std::string& name) {
  return create(store_, CommIdentity{str_cat(id_.prefix, "/dup/", name), id_.rank, id_.size});
}

void Communicator::abort() {
  if (fabric_) fabric_->abort();
}

}  // namespace kolo
