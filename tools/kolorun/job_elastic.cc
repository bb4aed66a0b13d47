// kolorun's elastic jobs (--min-np, --max-np, --host-discovery-script): docs/elastic.md.
#include <signal.h>

#include "engine/elastic.h"
#include "support/crypto.h"
#include "tools/kolorun/discovery.h"
#include "tools/kolorun/job.h"

namespace kolo::kolorun {

// Elastic: a rank that failed is dropped; the survivors rebuild their world without it.
// The job ends only when fewer than --min-np ranks run.
void Job::lost(Rank& rank, const std::string& how, int code) {
  if (rank.stopped && rank.where.joins && finished_) return;  // never let in before the end: not a loss
  const std::string name = str_cat("rank ", rank.where.rank, rank.where.joins ? " (joined)" : "", " on ",
                                   rank.where.host.empty() ? "this host" : rank.where.host);
  lost_.push_back(name);
  const int running = running_count();
  say(str_cat(name, " ", how, rank.stopped ? " (stopped: its host is no longer listed)" : "", "; ", running,
              " rank(s) run (--min-np ", spec_.min_np, ")"));
  if (running >= spec_.min_np) return;
  std::string names;
  for (const std::string& l : lost_) names += (names.empty() ? "" : ", ") + l;
  say(str_cat("fewer than --min-np ", spec_.min_np, " ranks run; stopping the job. Lost: ", names));
  set_exit(code);
  terminate();
}

// Names for this machine (localhost, its host name) are one host.
bool Job::on_host(const Rank& rank, const std::string& host) const {
  return rank.where.host == host || (rank.where.local && is_local_host(host, spec_.this_hostname));
}

int Job::running_count(const std::string* host) const {
  int n = 0;
  for (const Rank& rank : ranks_) n += rank.running && !rank.stopped && (host == nullptr || on_host(rank, *host));
  return n;
}

void Job::stop(Rank& rank) {
  rank.stopped = true;
  close_fd(rank.stdin_fd);
  ::kill(-rank.pid, SIGTERM);
}

void Job::elastic_tick(TimePoint now) {
  if (next_discovery_ && now >= *next_discovery_) discover();
  for (Rank& rank : ranks_) {  // asked to leave, and still here after the grace
    if (!rank.running || rank.stopped || !rank.leave_by || now < *rank.leave_by) continue;
    say(str_cat("rank ", rank.where.rank, " did not leave within ", kLeaveGraceSeconds, " s: stopping it"));
    stop(rank);
  }
  if (stop_joiners_at_ && now >= *stop_joiners_at_) {
    for (Rank& rank : ranks_) {
      if (!rank.running || !rank.where.joins || rank.stopped) continue;
      say(str_cat("rank ", rank.where.rank, " (joined) still runs ", kJoinerGraceSeconds,
                  " s after the job's first rank finished: stopping it (never let in?)"));
      stop(rank);
    }
    stop_joiners_at_.reset();
  }
}

// Polls the discovery script: ranks on hosts it no longer lists are asked to leave, and
// hosts with free slots get new ranks (KOLO_ELASTIC=join), up to --max-np.
void Job::discover() {
  next_discovery_ = after(spec_.discovery_interval_s);
  if (finished_) return;  // the job is ending
  Result<std::vector<HostSlots>> hosts = discover_hosts(spec_.discovery_script, 30);
  if (!hosts.ok()) {
    if (hosts.status().message() != last_discovery_error_) say(hosts.status().message() + "; polling on");
    last_discovery_error_ = hosts.status().message();
    return;
  }
  last_discovery_error_.clear();
  // Ranks on hosts no longer listed are asked to leave at their next commit (the key
  // kolo_comm_leaving reads); a host listed again is cleared.
  for (Rank& rank : ranks_) {
    if (!rank.running || rank.stopped) continue;
    bool listed = false;
    for (const HostSlots& h : hosts.value()) listed |= on_host(rank, h.name);
    if (listed == !rank.leave_by) continue;
    if (Status s = mark_host(rank.where.host, !listed); !s.ok()) {
      say(str_cat("cannot mark host ", rank.where.host, " in the store (", s.message(), "): stopping rank ",
                  rank.where.rank));
      stop(rank);
      continue;
    }
    if (listed) {
      say(str_cat("host ", rank.where.host, " is listed again: rank ", rank.where.rank, " stays"));
      rank.leave_by.reset();
    } else {
      say(str_cat("host ", rank.where.host, " is no longer listed: rank ", rank.where.rank,
                  " leaves at the job's next commit (stopped in ", kLeaveGraceSeconds, " s otherwise)"));
      rank.leave_by = after(kLeaveGraceSeconds);
    }
  }
  for (const HostSlots& host : hosts.value()) {
    int here = running_count(&host.name);
    while (here < host.slots && running_count() < spec_.max_np) {
      const bool local = is_local_host(host.name, spec_.this_hostname);
      if (!local && (spec_.store_on_loopback || !ssh_path_)) {
        say(str_cat("host ", host.name, " cannot get ranks: ", spec_.store_on_loopback
                        ? "the store listens on 127.0.0.1 (give --store-host)" : "no ssh or --launcher program"));
        break;
      }
      start_joiner(host, here++);
    }
  }
}

// Sets elastic/leaving/<host> in kolorun's own store through a client of its own (made
// the first time).
Status Job::mark_host(const std::string& host, bool leaving) {
  const std::string value = leaving ? "1" : "0";
  if (leaving ? !leaving_hosts_.insert(host).second : leaving_hosts_.erase(host) == 0) return Status();
  if (!store_) {
    auto address = parse_host_port(spec_.addr);
    if (!address.ok()) return address.status();
    auto secret = from_hex(spec_.secret_hex);
    if (!secret.ok()) return secret.status();
    auto client = StoreClient::connect(address.value(), secret.value(), Deadline(10));
    if (!client.ok()) return client.status();
    store_ = client.take();
  }
  return store_->set(leaving_host_key(host), value, Deadline(10));
}


void Job::start_joiner(const HostSlots& host, int local_rank) {
  Rank rank;
  rank.where.rank = next_number_++;
  rank.where.host = host.name;
  rank.where.local = is_local_host(host.name, spec_.this_hostname);
  rank.where.local_rank = local_rank;
  rank.where.local_size = host.slots;
  rank.where.joins = true;
  if (rank.where.local && !program_path_) return;  // said at start
  ranks_.push_back(std::move(rank));
  Status started = start(ranks_.back());
  if (!started.ok()) {
    say(str_cat("rank ", ranks_.back().where.rank, " on ", host.name, ": ", started.message()));
    ranks_.pop_back();
    return;
  }
  say(str_cat("started rank ", ranks_.back().where.rank, " on ", host.name, "; it joins at the job's next rebuild"));
}

}  // namespace kolo::kolorun
