#include "transport/shm/shm_transport.h"

#include <algorithm>
#include <string>

#include "support/env.h"
#include "transport/shm/shm_domain.h"
#include "transport/shm/shm_link.h"

namespace kolo::shm {
namespace {

constexpr const char* kName = "shm";

Status check_env() {
  Result<long long> chunk = env_int("KOLO_SHM_CHUNK_BYTES");  // 4096 .. 2^30 (the table's range)
  if (!chunk.ok()) return chunk.status();
  const std::string single_copy = env_string("KOLO_SHM_SINGLE_COPY");
  if (single_copy != "0" && single_copy != "1") {
    return error(Code::kInvalidArgument, "KOLO_SHM_SINGLE_COPY='", single_copy, "' is not 0 or 1");
  }
  return Status();
}

bool reachable(const TransportEnv& env, int rank, int peer) { return env.host_of_rank[peer] == env.host_of_rank[rank]; }

// Sleeps on the domain's inbox, which the peers' links ring.
class InboxWake final : public WakeSource {
 public:
  explicit InboxWake(Domain& domain) : domain_(domain) {}
  void arm() override { seen_ = domain_.inbox_word(); }
  void sleep(int timeout_ms) override { domain_.sleep_on_inbox(seen_, timeout_ms); }
  void abort() override { domain_.abort(); }

 private:
  Domain& domain_;
  uint32_t seen_ = 0;  // the inbox word before the last progress pass: no lost wake-ups
};

Status connect(const TransportEnv& env, const std::vector<int>& peers, const Deadline& deadline,
               TransportOutput* out) {
  const int me = env.rank;
  // One domain per host: the ranks here that join some peer over shm (each of them
  // connects, and all compute the same list). With every rank allowing shm: all of them.
  std::vector<int> members;
  for (int r = 0; r < env.size; ++r) {
    if (!reachable(env, me, r)) continue;
    for (int s = 0; s < env.size; ++s) {
      const TransportRow* row = s == r ? nullptr : choose_transport(env, r, s);
      if (row != nullptr && std::string(row->name) == kName) {
        members.push_back(r);
        break;
      }
    }
  }
  DomainOptions options;
  options.key_prefix = str_cat(env.prefix, "/host", env.host_of_rank[me]);
  options.members = members;
  options.my_index = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  options.slot_bytes = static_cast<size_t>(env_int("KOLO_SHM_CHUNK_BYTES").value());  // checked in check_env
  options.single_copy = env_string("KOLO_SHM_SINGLE_COPY") == "1";
  options.left = env.left;
  auto created = Domain::create(env.local_store != nullptr ? *env.local_store : *env.store, options, deadline);
  if (!created.ok()) return created.status();
  std::unique_ptr<Domain> domain = created.take();
  for (int r : peers) out->links[r] = std::make_unique<ShmLink>(*domain, me, r);
  out->wake = std::make_unique<InboxWake>(*domain);
  out->shared = std::move(domain);
  return Status();
}

}  // namespace

TransportRow shm_transport_row() { return TransportRow{kName, check_env, reachable, connect}; }

}  // namespace kolo::shm
