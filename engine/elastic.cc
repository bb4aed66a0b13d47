#include "engine/elastic.h"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <sstream>
#include <thread>

#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

constexpr const char* kJoinersKey = "elastic/joiners";  // ADD counter: tickets handed out
std::string joiner_key(int64_t ticket) { return str_cat("elastic/joiner/", ticket); }
std::string joiner_live_key(const std::string& id) { return str_cat("elastic/live/", id); }
std::string admitted_key(const std::string& id) { return str_cat("elastic/admitted/", id); }

// Polling interval of the decider: short against KOLO_TIMEOUT, long against a store round trip.
constexpr auto kPoll = std::chrono::milliseconds(10);
// Polling interval of the others, waiting for the outcome: every member polls, so slower.
constexpr auto kAwaitPoll = std::chrono::milliseconds(20);

std::mutex& g_job_mutex = *new std::mutex;
std::shared_ptr<StoreSession>& g_job = *new std::shared_ptr<StoreSession>;

// A count another process wrote into the store: checked, never trusted to parse.
Result<int64_t> parse_count(const std::string& text, const std::string& what) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return error(Code::kInternal, what, " in the store is '", text.substr(0, 40), "', not a count");
  }
  return value;
}

// The outcome as the decider writes it: "ok\n<joined>\n<id>,<id>..." or "error\n<why>".
std::string encode_outcome(int64_t joined, const std::vector<std::string>& members) {
  std::string text = str_cat("ok\n", joined, "\n");
  for (size_t i = 0; i < members.size(); ++i) text += (i ? "," : "") + members[i];
  return text;
}

Result<Membership> decode_outcome(const std::string& text, const std::string& me, const std::string& prefix) {
  if (text.rfind("error\n", 0) == 0) {
    return error(Code::kAborted, "the members of ", prefix, " could not agree: ", text.substr(6));
  }
  std::istringstream in(text);
  std::string ok, joined, list;
  std::getline(in, ok);
  std::getline(in, joined);
  std::getline(in, list);
  auto count = parse_count(joined, str_cat("the joiners counted at ", prefix));
  if (ok != "ok" || !count.ok()) return error(Code::kInternal, "malformed membership record at ", prefix);
  Membership m;
  m.joined = count.value();
  std::istringstream ids(list);
  for (std::string id; std::getline(ids, id, ',');) {
    if (id == me) m.rank = static_cast<int>(m.members.size());
    m.members.push_back(id);
  }
  return m;
}

enum class Presence { kPending, kHere, kGone };

// Whether old rank r's live key is still there: its process, and its connection, live.
Result<bool> is_live(StoreClient& store, const std::string& old_prefix, int r) {
  auto live = store.peek(live_key(old_prefix, r), Deadline(env_timeout_seconds()));
  if (!live.ok()) return live.status();
  return live.value().has_value();
}

// The decider: waits until each old member expected has posted that it is here or has
// gone (its live key erased with its connection), at most until `grace` (the call's
// deadline); then lets in the live joiners and writes the outcome for everyone. Each store
// request has a deadline of its own: one that ran out would close the connection, and the
// outcome must still be written when the grace has run out.
Status decide(const MembershipRequest& rq, const Deadline& grace) {
  StoreClient& store = *rq.store;
  const double op_seconds = env_timeout_seconds();
  const int n = static_cast<int>(rq.members.size());
  std::vector<Presence> presence(n, Presence::kPending);
  for (int r : rq.exclude) presence[r] = Presence::kGone;
  auto pending = [&] { return std::count(presence.begin(), presence.end(), Presence::kPending); };
  while (pending() > 0 && !grace.expired()) {
    for (int r = 0; r < n; ++r) {
      if (presence[r] != Presence::kPending) continue;
      auto here = store.peek(str_cat(rq.prefix, "/here/", rq.members[r]), Deadline(op_seconds));
      if (!here.ok()) return here.status();
      if (here.value()) {
        presence[r] = Presence::kHere;
        continue;
      }
      auto live = is_live(store, rq.old_prefix, r);
      if (!live.ok()) return live.status();
      if (!live.value()) presence[r] = Presence::kGone;
    }
    if (pending() > 0) std::this_thread::sleep_for(kPoll);
  }
  // One that came and then died (its live key gone since) is gone too: it would never make
  // the new communicator with the others.
  for (int r = 0; r < n; ++r) {
    if (presence[r] != Presence::kHere) continue;
    auto live = is_live(store, rq.old_prefix, r);
    if (!live.ok()) return live.status();
    if (!live.value()) presence[r] = Presence::kGone;
  }
  std::vector<std::string> members;
  std::string refusal;
  for (int r = 0; r < n; ++r) {
    const bool excluded = std::find(rq.exclude.begin(), rq.exclude.end(), r) != rq.exclude.end();
    if (presence[r] == Presence::kHere) {
      members.push_back(rq.members[r]);
    } else if (rq.exclude_given && !excluded) {  // the callers said who goes: anyone else missing is an error
      refusal += str_cat(refusal.empty() ? "" : "; ", "rank ", r, " is not in the exclude list but ",
                         presence[r] == Presence::kGone ? "its process is gone" : "did not take part within KOLO_TIMEOUT");
    } else if (!excluded) {
      log_warn(Subsys::kInit, rq.prefix, ": rank ", r, " (worker ", rq.members[r], ") is left out: ",
               presence[r] == Presence::kGone ? "its process is gone" : "it did not take part within KOLO_TIMEOUT");
    }
  }
  if (!refusal.empty()) return store.set(str_cat(rq.prefix, "/members"), "error\n" + refusal, Deadline(op_seconds));
  int64_t joined = rq.joined_before;
  std::vector<std::string> admitted;
  if (rq.admit_joiners) {
    auto tickets = store.peek(kJoinersKey, Deadline(op_seconds));
    if (!tickets.ok()) return tickets.status();
    auto counted = tickets.value() ? parse_count(*tickets.value(), kJoinersKey) : Result<int64_t>(0);
    if (!counted.ok()) return counted.status();
    const int64_t last = counted.value();
    for (int64_t t = rq.joined_before + 1; t <= last; ++t) {
      // A joiner names itself right after taking its ticket; one that died in between is skipped.
      std::optional<std::string> id;
      for (int tries = 0; tries < 100 && !id; ++tries) {
        auto got = store.peek(joiner_key(t), Deadline(op_seconds));
        if (!got.ok()) return got.status();
        id = got.take();
        if (!id) std::this_thread::sleep_for(kPoll);
      }
      if (!id) continue;
      auto live = store.peek(joiner_live_key(*id), Deadline(op_seconds));
      if (!live.ok()) return live.status();
      if (live.value()) admitted.push_back(*id);
    }
    joined = last;
  }
  members.insert(members.end(), admitted.begin(), admitted.end());
  KOLO_TRY(store.set(str_cat(rq.prefix, "/members"), encode_outcome(joined, members), Deadline(op_seconds)));
  for (const std::string& id : admitted) KOLO_TRY(store.set(admitted_key(id), std::to_string(rq.epoch), Deadline(op_seconds)));
  log_info(Subsys::kInit, rq.prefix, ": ", members.size(), " members (", admitted.size(), " joined)");
  return Status();
}

// Every member waits for the outcome; should the decider die before writing it (its live
// key gone), the first waiter to notice takes over and decides, the dead one counted gone.
// Polled (every kAwaitPoll): a GET that ran out would close the connection. The decider
// may wait until its deadline (near ours) and then write: KOLO_TIMEOUT more.
Result<std::string> await_outcome(const MembershipRequest& rq, const Deadline& deadline) {
  StoreClient& store = *rq.store;
  const double op_seconds = env_timeout_seconds();
  const Deadline until(deadline.remaining_seconds() + op_seconds);
  const std::string members_key = str_cat(rq.prefix, "/members");
  while (true) {
    auto outcome = store.peek(members_key, Deadline(op_seconds));
    if (!outcome.ok()) return outcome.status();
    if (outcome.value()) return *outcome.value();
    if (until.expired()) return error(Code::kTimeout, "no outcome at ", rq.prefix, " within KOLO_TIMEOUT");
    auto decider = store.peek(str_cat(rq.prefix, "/decider"), Deadline(op_seconds));
    if (!decider.ok()) return decider.status();
    auto rank = decider.value() ? parse_count(*decider.value(), "the decider") : Result<int64_t>(-1);
    if (rank.ok() && rank.value() >= 0 && rank.value() != rq.my_old_rank) {
      auto live = is_live(store, rq.old_prefix, static_cast<int>(rank.value()));
      if (!live.ok()) return live.status();
      if (!live.value()) {
        auto takeover = store.add(str_cat(rq.prefix, "/takeover/", rank.value()), 1, Deadline(op_seconds));
        if (!takeover.ok()) return takeover.status();
        if (takeover.value() == 1) {
          log_warn(Subsys::kInit, rq.prefix, ": the decider (rank ", rank.value(), ") died; rank ", rq.my_old_rank,
                   " decides");
          KOLO_TRY(store.set(str_cat(rq.prefix, "/decider"), std::to_string(rq.my_old_rank), Deadline(op_seconds)));
          KOLO_TRY(decide(rq, deadline));
        }
      }
    }
    std::this_thread::sleep_for(kAwaitPoll);
  }
}

}  // namespace

std::shared_ptr<StoreSession> elastic_job_store() {
  std::lock_guard<std::mutex> lock(g_job_mutex);
  return g_job;
}

void keep_elastic_job_store(std::shared_ptr<StoreSession> session) {
  std::lock_guard<std::mutex> lock(g_job_mutex);
  if (!g_job) g_job = std::move(session);  // one elastic world per process: the first
}

std::string elastic_epoch_prefix(int epoch) { return str_cat("elastic/", epoch); }
std::string leaving_host_key(const std::string& host) { return str_cat("elastic/leaving/", host); }
std::string live_prefix(const std::string& comm_prefix) { return str_cat(comm_prefix, "/live/"); }
std::string live_key(const std::string& comm_prefix, int rank) { return str_cat(live_prefix(comm_prefix), rank); }

namespace {
constexpr double kMarkSeconds = 0.2;  // a stopped store (its host SIGSTOPped) costs this, once
constexpr double kLiveWaitSeconds = 0.1;
constexpr double kSilentWaitSeconds = 0.2;  // for the others to fail as well (their deadlines are alike)
std::string failed_prefix(const std::string& live_keys) { return str_cat(live_keys, "failed/"); }
}  // namespace

// `here` less its closing parenthesis when that quotes the end of `why` (a host peer's
// failure quotes what it saw, shm_domain.cc, and the caller puts all of `why` first).
std::string without_quote_of(std::string here, const std::string& why) {
  if (here.empty() || here.back() != ')') return here;
  int depth = 0;
  for (size_t i = here.size(); i-- > 0;) {
    depth += here[i] == ')' ? 1 : here[i] == '(' ? -1 : 0;
    if (depth != 0) continue;
    const std::string quoted = here.substr(i + 1, here.size() - i - 2);
    if (i > 0 && quoted.size() <= why.size() && why.compare(why.size() - quoted.size(), quoted.size(), quoted) == 0) {
      here.erase(here[i - 1] == ' ' ? i - 1 : i);
    }
    break;
  }
  return here;
}

// With every rank alive (one stuck, a link cut): what the first rank to see the cause saw,
// if that was another rank, put first ("collective call 6 (...): rank 2 did not arrive in
// time [reported first by rank 1]; here: ...").
Status first_failure(const Status& failure, StoreClient& liveness, const std::string& live_keys, int me,
                     const Deadline& deadline) {
  Result<std::optional<std::string>> first = liveness.peek(str_cat(live_keys, "first_failure"), deadline);
  if (!first.ok() || !first.value()) return failure;
  const std::string& text = *first.value();
  const size_t cut = text.find('\n');
  if (cut == std::string::npos || text.substr(0, cut) == std::to_string(me)) return failure;
  const std::string why = text.substr(cut + 1);
  return Status(failure.code(),
                str_cat(why, " [reported first by rank ", text.substr(0, cut), "]; here: ", without_quote_of(failure.message(), why)));
}

// Every rank alive: the ranks that did not say they failed too (mark_rank_failed) within
// kSilentWaitSeconds are the cause: alive, but never in the call the others failed in, or
// stuck in it (a rank waiting for a neighbour that waits for the stuck one names only the
// neighbour). Where many are silent it is no answer (failures that only some ranks saw,
// ranks that do not mark: the start-up exchange), and what the first to fail saw is quoted.
Status silent_or_first_failure(const Status& failure, StoreClient& liveness, const std::string& live_keys, int size,
                               int me, const Deadline& deadline) {
  Result<std::vector<int>> silent = liveness.absent(failed_prefix(live_keys), size, kSilentWaitSeconds, deadline);
  if (!silent.ok() || silent.value().empty() || 2 * silent.value().size() > static_cast<size_t>(size) ||
      std::binary_search(silent.value().begin(), silent.value().end(), me)) {
    return first_failure(failure, liveness, live_keys, me, deadline);
  }
  const std::vector<int>& who = silent.value();
  return Status(failure.code(), str_cat(who.size() == 1 ? "rank " : "ranks ", rank_list(who, 16),
                                        " did not fail with the other ", size - static_cast<int>(who.size()),
                                        who.size() == 1 ? " (it never entered this call, is stuck in it, or cannot "
                                                          "reach the store)"
                                                        : " (they never entered this call, are stuck in it, or cannot "
                                                          "reach the store)",
                                        "; here: ", failure.message()));
}

Status mark_rank_failed(StoreClient& liveness, const std::string& live_keys, int rank, const std::string& why,
                        bool cause) {
  const Deadline deadline(kMarkSeconds);
  KOLO_TRY(liveness.set(str_cat(failed_prefix(live_keys), rank), why.substr(0, 512), deadline));
  // The first rank to see a cause (a peer that did not come, a mismatch) says what it saw:
  // the others' failures are its echoes, and name it.
  if (!cause) return Status();
  Result<int64_t> order = liveness.add(str_cat(live_keys, "first_failure/count"), 1, deadline);
  if (!order.ok()) return order.status();
  if (order.value() != 1) return Status();
  return liveness.set(str_cat(live_keys, "first_failure"), str_cat(rank, "\n", why.substr(0, 1024)), deadline);
}

void linger_for_failures(StoreClient& liveness, const std::string& live_keys, int size, double seconds) {
  const Deadline deadline(seconds + 0.5);
  (void)liveness.absent(failed_prefix(live_keys), size, seconds, deadline);
}

Status name_ranks_gone(const Status& failure, StoreClient& liveness, const std::string& live_keys, int size,
                       int me, double seconds, bool store_of_rank0) {
  // A short wait for the live keys: a rank killed a moment ago may not have lost its key yet
  // (the store sees its connection close); then at once, who said it failed.
  const Deadline deadline(seconds);
  Result<std::vector<int>> missing = liveness.absent(live_keys, size, kLiveWaitSeconds, deadline);
  if (!missing.ok()) {
    if (!store_of_rank0 || missing.status().code() == Code::kTimeout) return failure;
    return Status(failure.code(), str_cat("rank 0 is not alive (its store closed: ", missing.status().message(),
                                          "); here: ", failure.message()));
  }
  if (missing.value().empty()) return silent_or_first_failure(failure, liveness, live_keys, size, me, deadline);
  // Ranks that failed and said so (mark_rank_failed) before they exited are echoes, not causes.
  Result<std::vector<int>> unmarked = liveness.absent(failed_prefix(live_keys), size, 0, deadline);
  if (!unmarked.ok()) return failure;
  std::vector<int> gone;
  for (int r : missing.value()) {
    if (std::binary_search(unmarked.value().begin(), unmarked.value().end(), r)) gone.push_back(r);
  }
  if (gone.empty()) return silent_or_first_failure(failure, liveness, live_keys, size, me, deadline);
  return Status(failure.code(), str_cat(gone.size() == 1 ? "rank " : "ranks ", rank_list(gone, 16),
                                        gone.size() == 1 ? " is" : " are",
                                        " not alive (never started, exited or killed); here: ", failure.message()));
}

Result<Membership> agree_membership(const MembershipRequest& rq, const Deadline& deadline) {
  StoreClient& store = *rq.store;
  const std::string me = rq.members[rq.my_old_rank];
  KOLO_TRY(store.set(str_cat(rq.prefix, "/here/", me), "1", deadline));
  auto arrived = store.add(str_cat(rq.prefix, "/arrived"), 1, deadline);
  if (!arrived.ok()) return arrived.status();
  if (arrived.value() == 1) {
    KOLO_TRY(store.set(str_cat(rq.prefix, "/decider"), std::to_string(rq.my_old_rank), deadline));
    KOLO_TRY(decide(rq, deadline));
  }
  Result<std::string> outcome = await_outcome(rq, deadline);
  if (!outcome.ok()) return outcome.status().with_context(str_cat("waiting for the members of ", rq.prefix, ": "));
  auto m = decode_outcome(outcome.value(), me, rq.prefix);
  if (!m.ok()) return m.status();
  if (m.value().rank < 0) {
    return error(Code::kAborted, "rank ", rq.my_old_rank, " (worker ", me, ") was left out of ", rq.prefix,
                 ": the others agreed before it took part. A rank of an old epoch cannot rejoin; restart it "
                 "as a new worker (KOLO_ELASTIC=join)");
  }
  return m;
}

Result<int> pending_joiners(StoreClient& job, int64_t joined, const Deadline& deadline) {
  auto tickets = job.peek(kJoinersKey, deadline);
  if (!tickets.ok()) return tickets.status();
  auto counted = tickets.value() ? parse_count(*tickets.value(), kJoinersKey) : Result<int64_t>(0);
  if (!counted.ok()) return counted.status();
  return static_cast<int>(std::clamp<int64_t>(counted.value() - joined, 0, 1 << 24));
}

Result<std::unique_ptr<Communicator>> join_elastic_world(std::shared_ptr<StoreSession> job) {
  Result<double> wait = env_double("KOLO_ELASTIC_JOIN_TIMEOUT");
  if (!wait.ok()) return wait.status();
  const Deadline deadline(wait.value());
  StoreClient& store = *job->client;
  auto ticket = store.add(kJoinersKey, 1, deadline);
  if (!ticket.ok()) return ticket.status().with_context("joining the elastic job: ");
  const std::string id = str_cat("j", ticket.value());
  KOLO_TRY(store.set_owned(joiner_live_key(id), "1", deadline));
  KOLO_TRY(store.set(joiner_key(ticket.value()), id, deadline));
  log_info(Subsys::kInit, "worker ", id, " waits to be let in at the next rebuild of the elastic job");
  // Let in at an epoch whose making then failed (a member died meanwhile), it waits to be
  // let in again: the next rebuild counts its ticket anew.
  int failed_epoch = -1;
  while (true) {
    Result<std::string> epoch_text = store.get(admitted_key(id), deadline);  // set once let in, then overwritten
    if (!epoch_text.ok()) {
      return epoch_text.status().with_context(str_cat("worker ", id, " waiting to join (KOLO_ELASTIC_JOIN_TIMEOUT=",
                                                      wait.value(), " s; the job lets workers in when it rebuilds): "));
    }
    auto admitted = parse_count(epoch_text.value(), admitted_key(id));
    if (!admitted.ok() || admitted.value() > (1 << 30) || admitted.value() == failed_epoch) {
      if (deadline.expired()) return error(Code::kTimeout, "worker ", id, " was not let in again in time");
      std::this_thread::sleep_for(kAwaitPoll);
      continue;
    }
    const int epoch = static_cast<int>(admitted.value());
    const std::string prefix = elastic_epoch_prefix(epoch);
    const Deadline within(env_timeout_seconds());
    auto outcome = store.get(str_cat(prefix, "/members"), within);
    if (!outcome.ok()) return outcome.status();
    auto m = decode_outcome(outcome.value(), id, prefix);
    if (!m.ok()) return m.status();
    if (m.value().rank < 0) return error(Code::kInternal, "worker ", id, " was let in at ", prefix, " but is not a member");
    log_set_rank(m.value().rank);
    auto comm = Communicator::create(job, CommIdentity{str_cat(prefix, "/comm"), m.value().rank,
                                                       static_cast<int>(m.value().members.size())}, &within);
    if (comm.ok()) {
      comm.value()->set_lineage(Lineage{epoch, m.value().members, m.value().joined, true});
      return comm;
    }
    log_warn(Subsys::kInit, "worker ", id, ": making the communicator of ", prefix, " failed (", comm.status().message(),
             "); waiting to be let in again");
    failed_epoch = epoch;
  }
}

// ---- Communicator's elastic calls ----

Result<std::unique_ptr<Communicator>> Communicator::next_epoch(MembershipRequest request, const std::string& prefix) {
  const Deadline deadline(timeout_seconds_);
  // The job's store where the process keeps one (it outlives every rank; the live keys
  // are there too, create()), else this communicator's own.
  std::shared_ptr<StoreSession> job = elastic_job_store();
  std::shared_ptr<StoreSession> session = job ? job : store_;
  request.store = session->client.get();
  request.prefix = prefix;
  request.old_prefix = id_.prefix;
  request.members = lineage_.members;
  request.my_old_rank = id_.rank;
  if (request.epoch <= lineage_.epoch) request.epoch = lineage_.epoch + 1;
  auto agreed = agree_membership(request, deadline);
  if (!agreed.ok()) {
    if (session == store_ && agreed.status().code() == Code::kRemote) {
      return agreed.status().with_context(
          "the communicator's store lived in its rank 0's process, which is gone (a shrink without rank 0 needs the "
          "job's store: run under kolorun with KOLO_ELASTIC=1): ");
    }
    return agreed.status();
  }
  const Membership& m = agreed.value();
  // The agreement may have waited out the call's deadline for a straggler: making the new
  // communicator gets KOLO_TIMEOUT of its own.
  const Deadline making(timeout_seconds_);
  auto made = create(session, CommIdentity{str_cat(prefix, "/comm"), m.rank, static_cast<int>(m.members.size())},
                     &making);
  if (!made.ok()) {
    // A member died between the agreement and the new communicator: this epoch is spent.
    // Marked, so that the next rebuild (every member's) agrees on the next number.
    (void)session->client->set(str_cat(prefix, "/failed"), "1", Deadline(timeout_seconds_));
    return made.status().with_context(str_cat("making the communicator of ", prefix, " (rebuild again): "));
  }
  made.value()->set_lineage(Lineage{request.epoch, m.members, m.joined, lineage_.elastic_world});
  log_info(Subsys::kInit, "rank ", id_.rank, " of ", id_.prefix, " (worker ", lineage_.members[id_.rank],
           ") is rank ", m.rank, " of ", m.members.size(), " in epoch ", request.epoch);
  return made;
}

Result<std::unique_ptr<Communicator>> Communicator::shrink(const std::vector<int>& exclude, bool exclude_given) {
  for (int r : exclude) {
    if (r < 0 || r >= id_.size) {
      return error(Code::kInvalidArgument, "rank ", id_.rank, ": exclude list names rank ", r, ", not in [0, ",
                   id_.size, ")");
    }
    if (r == id_.rank) {
      return error(Code::kInvalidUsage, "rank ", id_.rank, " is in its own exclude list: excluded ranks do not "
                   "call kolo_comm_shrink");
    }
  }
  MembershipRequest request;
  request.exclude = exclude;
  request.exclude_given = exclude_given;
  return next_epoch(std::move(request), str_cat(id_.prefix, "/shrink", shrink_seq_++));
}

Result<std::unique_ptr<Communicator>> Communicator::rebuild() {
  if (!lineage_.elastic_world || !elastic_job_store()) {
    return error(Code::kInvalidUsage, "rank ", id_.rank, ": kolo_comm_rebuild needs an elastic world: the "
                 "communicator of kolo_init (or of a rebuild) with KOLO_ELASTIC=1, which kolorun --min-np/--max-np "
                 "sets; other communicators can kolo_comm_shrink");
  }
  MembershipRequest request;
  request.admit_joiners = true;
  request.joined_before = lineage_.joined;
  // The first epoch after this one whose making did not fail (next_epoch marks those).
  StoreClient& job = *elastic_job_store()->client;
  for (request.epoch = lineage_.epoch + 1;; ++request.epoch) {
    auto failed = job.peek(str_cat(elastic_epoch_prefix(request.epoch), "/failed"), Deadline(timeout_seconds_));
    if (!failed.ok()) return failed.status();
    if (!failed.value()) break;
  }
  return next_epoch(std::move(request), elastic_epoch_prefix(request.epoch));
}

Result<bool> Communicator::leaving() {
  std::shared_ptr<StoreSession> job = elastic_job_store();
  const std::string host = env_string("KOLO_ELASTIC_HOST");
  if (!lineage_.elastic_world || !job || host.empty()) return false;
  auto mark = job->client->peek(leaving_host_key(host), Deadline(timeout_seconds_));
  if (!mark.ok()) return mark.status();
  return mark.value().value_or("0") == "1";
}

Result<int> Communicator::pending_joiners() {
  std::shared_ptr<StoreSession> job = elastic_job_store();
  if (!lineage_.elastic_world || !job) return 0;
  return kolo::pending_joiners(*job->client, lineage_.joined, Deadline(timeout_seconds_));
}

}  // namespace kolo
