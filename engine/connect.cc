#include "engine/connect.h"

#include "support/env.h"
#include "support/log.h"
#include "transport/transport.h"

namespace kolo {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text.empty() ? "none" : text;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

}  // namespace
Result<std::unique_ptr<Connections>> Connections::create(const ConnectRequest& request, const Deadline& deadline) {
  std::unique_ptr<Connections> conn(new Connections());
  KOLO_TRY(conn->connect(request, deadline));
  return conn;
}

Connections::~Connections() {
  if (fabric_) fabric_->shutdown();
}

void Connections::fail() {
  // Closing our links makes peers that wait on us fail now instead of at their deadline.
  fabric_->shutdown(/*after_failure=*/true);
  if (domain_) domain_->mark_failed();
}

void Connections::abort() { fabric_->abort(); }

// Per peer, the first transport of the table (in KOLO_TRANSPORTS order) that both ends
// allow and that reaches it; then each transport connects to the peers chosen for it.
Status Connections::connect(const ConnectRequest& req, const Deadline& deadline) {
  const std::string setting = env_string("KOLO_TRANSPORTS");
  Result<std::vector<std::string>> mine = parse_transports(setting);
  if (!mine.ok()) return mine.status();
  const std::vector<TransportRow>& table = transport_table();
  for (const TransportRow& row : table) KOLO_TRY(row.check_env());
  StoreClient& store = *req.store;
  const int n = req.size, me = req.rank;
  TransportEnv env;
  static_cast<CommSite&>(env) = req;
  env.allowed.resize(n);
  // The transport of a pair must be chosen alike at both ends.
  KOLO_TRY(store.set(str_cat(req.prefix, "/transports/", me), name_list(mine.value()), deadline));
  for (int r = 0; r < n; ++r) {
    Result<std::string> text = store.get(str_cat(req.prefix, "/transports/", r), deadline);
    if (!text.ok()) return text.status().with_context(str_cat("waiting for rank ", r, "'s transports: "));
    Result<std::vector<std::string>> names = parse_transports(text.value());
    if (text.value().empty() || !names.ok()) return error(Code::kInternal, "rank ", r, " announced a malformed transport entry");
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
  std::string summary;
  for (size_t i = 0; i < table.size(); ++i) {
    summary += str_cat(summary.empty() ? "" : "; ", table[i].name, " to ranks ", rank_list(peers[i]));
    if (peers[i].empty()) continue;
    TransportOutput out;
    out.links.resize(n);
    KOLO_TRY(table[i].connect(env, peers[i], deadline, &out));
    for (int r : peers[i]) links[r] = std::move(out.links[r]);
    if (out.wake) wakes.push_back(std::move(out.wake));
    if (out.shared) {
      if (domain_) return error(Code::kInternal, "two transports share memory on this host");
      domain_ = std::move(out.shared);
      whole_ = domain_->size() == n;
    }
  }
  fabric_ = std::make_unique<Fabric>(me, n, std::move(links));
  for (auto& wake : wakes) fabric_->add_wake_source(std::move(wake));
  log_info(Subsys::kTransport, "rank ", me, ": ", summary);
  return Status();
}

}  // namespace kolo
