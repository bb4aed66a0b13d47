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
#include "transport/shm/shm_link.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo {
namespace {

constexpr uint64_t kPointToPointTagBit = uint64_t{1} << 63;

Result<std::string> listen_address(const StoreClient& client) {
  std::string ifname = env_string("KOLO_SOCKET_IFNAME");
  if (!ifname.empty()) return interface_address(ifname);
  return client.local_ip();  // the interface that reaches the store reaches the peers too
}

// KOLO_TRANSPORTS: a comma-separated subset of the transports built in.
Status parse_transports(const std::string& text, bool* shm, bool* tcp) {
  if (text.empty()) return Status();
  *shm = *tcp = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    if (name == "shm") {
      *shm = true;
    } else if (name == "tcp") {
      *tcp = true;
    } else {
      return error(Code::kInvalidArgument, "KOLO_TRANSPORTS='", text, "': '", name,
                   "' is not a transport of kolo (shm, tcp)");
    }
    start = end + 1;
  }
  return Status();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text.empty() ? "none" : text;
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
           comm->cross_size_, comm->local_ ? ", one-host collectives in shared memory" : "");
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
  KOLO_TRY(parse_transports(env_string("KOLO_TRANSPORTS"), &allow_shm_, &allow_tcp_));
  Result<long long> shm_chunk = env_int("KOLO_SHM_CHUNK_BYTES");
  if (!shm_chunk.ok()) return shm_chunk.status();
  if (shm_chunk.value() < 4096 || shm_chunk.value() > (1ll << 30)) {
    return error(Code::kInvalidArgument, "KOLO_SHM_CHUNK_BYTES=", shm_chunk.value(), " is outside 4096 .. 2^30");
  }
  shm_chunk_bytes_ = static_cast<size_t>(shm_chunk.value());
  const std::string single_copy = env_string("KOLO_SHM_SINGLE_COPY");
  if (single_copy != "0" && single_copy != "1") {
    return error(Code::kInvalidArgument, "KOLO_SHM_SINGLE_COPY='", single_copy, "' is not 0 or 1");
  }
  shm_single_copy_ = single_copy == "1";
  return Status();
}

Communicator::~Communicator() {
  if (fabric_) fabric_->shutdown();
}

Status Communicator::exchange_hosts(const Deadline& deadline) {
  StoreClient& store = *store_->client;
  // "<shm allowed 0|1> <host>": the transport of a pair must be chosen alike at both ends.
  KOLO_TRY(store.set(str_cat(id_.prefix, "/host/", id_.rank), str_cat(allow_shm_ ? 1 : 0, " ", host_identity()), deadline));
  std::vector<std::string> hosts(id_.size);
  shm_allowed_.assign(id_.size, false);
  for (int r = 0; r < id_.size; ++r) {
    Result<std::string> host = store.get(str_cat(id_.prefix, "/host/", r), deadline);
    if (!host.ok()) return host.status().with_context(str_cat("waiting for rank ", r, " to join: "));
    const std::string& text = host.value();
    if (text.size() < 2 || (text[0] != '0' && text[0] != '1') || text[1] != ' ') {
      return error(Code::kInternal, "rank ", r, " announced a malformed host entry");
    }
    shm_allowed_[r] = text[0] == '1';
    hosts[r] = text.substr(2);
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

// Same host and both ends allow it: shared memory; otherwise TCP.
Status Communicator::connect(const Deadline& deadline) {
  const int n = id_.size, me = id_.rank;
  std::vector<int> shm_members, shm_peers, tcp_peers;
  std::vector<bool> over_tcp(n, false);
  for (int r = 0; r < n; ++r) {
    const bool shared = host_of_rank_[r] == host_of_rank_[me] && shm_allowed_[r] && shm_allowed_[me];
    if (shared) shm_members.push_back(r);
    if (r == me) continue;
    (shared ? shm_peers : tcp_peers).push_back(r);
    over_tcp[r] = !shared;
  }
  if (!tcp_peers.empty() && !allow_tcp_) {
    return error(Code::kUnsupported, "KOLO_TRANSPORTS='", env_string("KOLO_TRANSPORTS"), "' allows no transport to ranks ",
                 rank_list(tcp_peers), " (another host, or shm not allowed there); add tcp");
  }
  std::vector<std::unique_ptr<Link>> links(n);
  if (!tcp_peers.empty()) {
    Result<std::string> ip = listen_address(*store_->client);
    if (!ip.ok()) return ip.status();
    MeshOptions options{id_.prefix, me, n, store_->secret, ip.value(), over_tcp};
    auto tcp = connect_tcp_mesh(*store_->client, options, deadline);
    if (!tcp.ok()) return tcp.status();
    links = tcp.take();
  }
  if (shm_members.size() >= 2) {
    KOLO_TRY(connect_shared_memory(shm_members, deadline));
    for (int r : shm_peers) links[r] = std::make_unique<shm::ShmLink>(*domain_, me, r);
  }
  fabric_ = std::make_unique<Fabric>(me, n, std::move(links));
  fabric_->set_shared_memory(domain_.get());
  log_info(Subsys::kTransport, "rank ", me, ": shm to ranks ", rank_list(shm_peers), "; tcp to ranks ",
           rank_list(tcp_peers));
  return Status();
}

Status Communicator::connect_shared_memory(const std::vector<int>& members, const Deadline& deadline) {
  shm::DomainOptions options;
  options.key_prefix = str_cat(id_.prefix, "/host", host_of_rank_[id_.rank]);  // one domain per host
  options.members = members;
  options.my_index = static_cast<int>(std::find(members.begin(), members.end(), id_.rank) - members.begin());
  options.slot_bytes = shm_chunk_bytes_;
  options.single_copy = shm_single_copy_;
  auto domain = shm::Domain::create(*store_->client, options, deadline);
  if (!domain.ok()) return domain.status();
  domain_ = domain.take();
  if (domain_->size() == id_.size) local_ = std::make_unique<LocalCollectives>(*domain_);
  return Status();
}

Algorithm Communicator::forced_for(const CollSpec& spec) const {
  return spec.algorithm != Algorithm::kAuto ? spec.algorithm : forced_algorithm_;
}

bool Communicator::runs_locally(const CollCall& call) const {
  if (!local_ || !LocalCollectives::supports(call.spec.kind) || is_empty(call.spec)) return false;
  const Algorithm forced = forced_for(call.spec);
  return forced == Algorithm::kAuto || forced == Algorithm::kOneShot || forced == Algorithm::kTwoShot;
}

// AVG is a sum divided by the communicator size on the way out, for every executor.
CollCall Communicator::lowered(const CollCall& original) const {
  CollCall call = original;
  if (call.spec.op == ReduceOp::kAvg) {
    call.spec.op = ReduceOp::kSum;
    call.postscale.divisor *= id_.size;
  }
  return call;
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
  if (domain_) domain_->mark_failed();
  return status;
}

Status Communicator::usable() {
  if (!failed_.ok()) {
    return error(Code::kAborted, "communicator failed earlier and cannot be used (", failed_.message(), ")");
  }
  if (fabric_->aborted()) return fail(error(Code::kAborted, "communicator was aborted"));
  return Status();
}

// The one-host path: no schedule, no plan cache, no allocation (an 8-byte allreduce here
// takes about a microsecond, so every step on the way counts).
Status Communicator::run_local(const CollCall& original) {
  const CollCall call = lowered(original);
  const Algorithm algorithm = choose_local_algorithm(call.spec, id_.size, domain_->agreed_cores(),
                                                     domain_->slot_bytes(), forced_for(call.spec));
  Status status = local_->run(call, algorithm, Deadline(timeout_seconds_));
  if (!status.ok()) return fail(status.with_context(str_cat("rank ", id_.rank, ", one-host ", coll_name(call.spec.kind), ": ")));
  return Status();
}

Status Communicator::run(const CollCall& call) {
  if (!runs_locally(call)) return run_group({call});
  std::lock_guard<std::mutex> lock(run_mutex_);
  KOLO_TRY(usable());
  return run_local(call);
}

Status Communicator::run_group(const std::vector<CollCall>& calls) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  KOLO_TRY(usable());
  if (calls.size() == 1 && runs_locally(calls[0])) return run_local(calls[0]);
  Schedule combined;
  combined.calls = 0;
  std::vector<CallBinding> bindings;
  for (const CollCall& original : calls) {
    if (is_empty(original.spec)) continue;
    CollCall call = lowered(original);
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
