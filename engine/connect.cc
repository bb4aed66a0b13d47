#include "engine/connect.h"

#include <sys/resource.h>

#include <cmath>

#include "support/env.h"
#include "support/log.h"
#include "transport/transport.h"

namespace kolo {
namespace {

std::string name_list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

// The descriptors a rank of this communicator may hold, against the process's limit: found
// at start-up, with the setting to change, not as EMFILE in the middle of a call. A rank
// holds a pidfd per rank on its host (shared memory), a socket per remote peer it links to
// (every one at start-up with KOLO_LAZY_CONNECT=0; about 2 log2 N ring and tree neighbours
// lazily), rank 0 one store connection per rank, and a host's first rank one per rank of
// its host (its host's store). The soft limit is raised to the hard one when that is enough.
Status check_descriptor_limit(const ConnectRequest& req) {
  int local = 0;
  for (int h : req.host_of_rank) local += h == req.host_of_rank[req.rank];
  const int remote = req.size - local;
  const bool lazy = env_string("KOLO_LAZY_CONNECT") == "1";
  const int links = lazy ? std::min(remote, 2 * static_cast<int>(std::ceil(std::log2(std::max(2, req.size)))) + 2)
                         : remote;
  bool host_first = true;
  for (int r = 0; r < req.rank; ++r) host_first = host_first && req.host_of_rank[r] != req.host_of_rank[req.rank];
  const long long needed = 64 + local + links + (req.rank == 0 ? req.size : 0) + (host_first ? local : 0);
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status();
  if (limit.rlim_cur == RLIM_INFINITY || static_cast<long long>(limit.rlim_cur) >= needed) return Status();
  if (limit.rlim_max == RLIM_INFINITY || static_cast<long long>(limit.rlim_max) >= needed) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(needed * 2)
                                                      : std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(needed * 2));
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      log_info(Subsys::kTransport, "rank ", req.rank, ": raised the file descriptor limit from ", limit.rlim_cur,
               " to ", raised.rlim_cur, " (", req.size, " ranks need about ", needed, ")");
      return Status();
    }
  }
  return error(Code::kUnsupported, "rank ", req.rank, ": a communicator of ", req.size, " ranks (", local,
               " on this host) needs about ", needed, " file descriptors here (one per rank on this host, one per ",
               lazy ? "linked remote peer" : "remote peer", req.rank == 0 ? ", one store connection per rank" : "",
               "), and the limit is ", static_cast<long long>(limit.rlim_cur), " (hard ",
               static_cast<long long>(limit.rlim_max), "): raise it with `ulimit -n`",
               lazy ? "" : ", or set KOLO_LAZY_CONNECT=1");
}

}  // namespace
Result<std::unique_ptr<Connections>> Connections::create(const ConnectRequest& request, const Deadline& deadline,
                                                         const std::vector<std::string>& transports) {
  std::unique_ptr<Connections> conn(new Connections());
  KOLO_TRY(conn->connect(request, deadline, transports));
  return conn;
}

Result<std::string> Connections::transports_entry() {
  Result<std::vector<std::string>> mine = parse_transports(env_string("KOLO_TRANSPORTS"));
  if (!mine.ok()) return mine.status();
  return name_list(mine.value());
}

Connections::~Connections() {
  if (fabric_) fabric_->shutdown();
}

void Connections::fail(const std::string& why) {
  // Closing our links makes peers that wait on us fail now instead of at their deadline.
  fabric_->shutdown(/*after_failure=*/true);
  if (domain_) domain_->mark_failed(why);
}

void Connections::abort() { fabric_->abort(); }

// Per peer, the first transport of the table (in KOLO_TRANSPORTS order) that both ends
// allow and that reaches it; then each transport connects to the peers chosen for it.
Status Connections::connect(const ConnectRequest& req, const Deadline& deadline,
                            const std::vector<std::string>& transports) {
  const std::string setting = env_string("KOLO_TRANSPORTS");
  Result<std::string> mine = transports_entry();
  if (!mine.ok()) return mine.status();
  const std::vector<TransportRow>& table = transport_table();
  for (const TransportRow& row : table) KOLO_TRY(row.check_env());
  KOLO_TRY(check_descriptor_limit(req));
  StoreClient& store = *req.store;
  const int n = req.size, me = req.rank;
  TransportEnv env;
  static_cast<CommSite&>(env) = req;
  env.allowed.resize(n);
  // The transport of a pair must be chosen alike at both ends.
  std::vector<std::string> texts = transports;
  if (texts.empty()) {
    KOLO_TRY(store.set(str_cat(req.prefix, "/transports/", me), mine.value(), deadline));
    Result<std::vector<std::string>> gathered = store.gather(str_cat(req.prefix, "/transports/"), n, deadline);
    if (!gathered.ok()) return gathered.status().with_context("waiting for the ranks' transports: ");
    texts = gathered.take();
  }
  if (static_cast<int>(texts.size()) != n) return error(Code::kInternal, texts.size(), " transport entries for ", n, " ranks");
  for (int r = 0; r < n; ++r) {
    const std::string& text = texts[r];
    Result<std::vector<std::string>> names = parse_transports(text);
    if (text.empty() || !names.ok()) return error(Code::kInternal, "rank ", r, " announced a malformed transport entry");
    env.allowed[r] = names.take();
  }
  std::vector<std::vector<int>> peers(table.size());
  std::vector<int> unreachable;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const TransportRow* row = choose_transport(env, me, r);
    if (row == nullptr) {
      unreachable.push_back(r);
    } else {
      peers[row - table.data()].push_back(r);
    }
  }
  if (!unreachable.empty()) {
    return error(Code::kUnsupported, "KOLO_TRANSPORTS='", setting, "' allows no transport to ranks ",
                 rank_list(unreachable), transport_unreachable_hint());
  }
  std::vector<std::unique_ptr<Link>> links(n);
  std::vector<std::unique_ptr<WakeSource>> wakes;
  std::vector<std::pair<std::unique_ptr<LinkMaker>, std::vector<int>>> makers;
  std::string summary;
  for (size_t i = 0; i < table.size(); ++i) {
    summary += str_cat(summary.empty() ? "" : "; ", table[i].name, " to ranks ", rank_list(peers[i]));
    if (peers[i].empty()) continue;
    TransportOutput out;
    out.links.resize(n);
    KOLO_TRY(table[i].connect(env, peers[i], deadline, &out));
    for (int r : peers[i]) links[r] = std::move(out.links[r]);
    if (out.wake) wakes.push_back(std::move(out.wake));
    if (out.maker) makers.emplace_back(std::move(out.maker), peers[i]);
    if (out.shared) {
      if (domain_) return error(Code::kInternal, "two transports share memory on this host");
      domain_ = std::move(out.shared);
      whole_ = domain_->size() == n;
    }
  }
  fabric_ = std::make_unique<Fabric>(me, n, std::move(links));
  for (auto& wake : wakes) fabric_->add_wake_source(std::move(wake));
  for (auto& [maker, lazy_peers] : makers) fabric_->add_maker(std::move(maker), lazy_peers);
  log_info(Subsys::kTransport, "rank ", me, ": ", summary);
  return Status();
}

bool shares_memory_on_one_host(const std::vector<std::string>& transports) {
  if (transports.empty()) return !transport_table().empty() && std::string(transport_table()[0].name) == "shm";
  return transports[0] == "shm";
}

}  // namespace kolo
