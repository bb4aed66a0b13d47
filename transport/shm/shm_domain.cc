#include "transport/shm/shm_domain.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "support/host_rates.h"
#include "support/log.h"

namespace kolo::shm {
namespace {

// What process_vm_readv must find in a peer to prove that single-copy reads work.
const volatile uint64_t kProbeValue = 0x6b6f6c6f2d636d61ull;

constexpr int kFutexSleepMs = 10;        // bounds how late an abort or a death is noticed
constexpr double kSpinSeconds = 200e-6;  // spin (pause, then yield) this long before sleeping
constexpr int kPauseSpins = 2000;        // about 2-10 microseconds of pause before yielding
// The first polls go without pause: a peer on another core answers within tens of
// nanoseconds, and a pause between polls (tens to ~140 cycles, by CPU) adds half of one on
// average to every such wait. Open MPI and MPICH poll without pause.
constexpr int kTightPolls = 64;
constexpr int kYieldSpins = 8;           // more ranks than cores: give the core away instead
constexpr double kHealthPeriod = 0.05;   // seconds between liveness checks of one peer
constexpr double kMembersSliceSeconds = 1.0;  // start-up: how often a wait for the members asks who left

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, int timeout_ms) {
  timespec timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ring_bell(Bell& bell) {
  bell.word.fetch_add(1, std::memory_order_seq_cst);
  if (bell.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(&bell.word);
}

// The CPUs this process may run on, as a bitmap (the first kCpuMaskWords * 64).
void publish_cpu_mask(std::atomic<uint64_t> (&mask)[kCpuMaskWords]) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < std::max(n, 1L) && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &set);
  }
  for (int w = 0; w < kCpuMaskWords; ++w) {
    uint64_t bits = 0;
    for (int b = 0; b < 64; ++b) {
      if (w * 64 + b < CPU_SETSIZE && CPU_ISSET(w * 64 + b, &set)) bits |= uint64_t{1} << b;
    }
    mask[w].store(bits, std::memory_order_release);
  }
}

}  // namespace

std::string offer_text(const Offer& offer) {
  const SegmentGeometry& g = offer.geometry;
  return str_cat(offer.name, " ", g.ranks, " ", g.slots, " ", g.slot_bytes, " ", g.ring_bytes);
}

Result<Offer> parse_offer(const std::string& text, int expected_ranks) {
  std::istringstream in(text);
  Offer offer;
  SegmentGeometry& g = offer.geometry;
  in >> offer.name >> g.ranks >> g.slots >> g.slot_bytes >> g.ring_bytes;
  if (!in || static_cast<int>(g.ranks) != expected_ranks || g.slots < 3 || g.slots > 64 || g.slot_bytes < 4096 ||
      g.slot_bytes > (size_t{1} << 30) || g.slot_bytes % 64 != 0 || g.ring_bytes < 4096 ||
      (g.ring_bytes & (g.ring_bytes - 1)) != 0 || g.ring_bytes > (size_t{1} << 30)) {
    return error(Code::kInternal, "the shared-memory offer of this host's first rank is malformed");
  }
  return offer;
}

Result<pid_t> parse_pid(const std::string& text) {
  char* end = nullptr;
  long pid = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || pid <= 0 || pid > INT_MAX) {
    return error(Code::kInternal, "invalid pid '", text, "'");
  }
  return static_cast<pid_t>(pid);
}

Result<std::unique_ptr<Domain>> Domain::create(StoreClient& store, const DomainOptions& options,
                                               const Deadline& deadline) {
  if (options.members.size() < 2 || options.members.size() > static_cast<size_t>(kMaxDomainRanks)) {
    return error(Code::kInvalidArgument, "a shared-memory domain needs 2 to ", kMaxDomainRanks, " ranks, not ",
                 options.members.size());
  }
  std::unique_ptr<Domain> domain(new Domain());
  Status status = domain->attach(store, options, deadline);
  if (!status.ok()) return status.with_context("shared memory: ");
  return domain;
}

// The members' pids, as StoreClient::gather, but in slices where `left` is set: between them
// it says whether a member still missing has left the job (failed its own start-up), which
// would otherwise hold this rank here until its deadline. Each slice is one gather (the
// server answers with who is missing, and the connection stays usable), so a start-up where
// every member comes costs no request more than before. The last stretch is one gather to
// the deadline, which names who never came.
Result<std::vector<std::string>> Domain::gather_members(StoreClient& store, const std::string& prefix,
                                                        const std::function<Status(const std::vector<int>&)>& left,
                                                        const Deadline& deadline) {
  while (left && deadline.remaining_seconds() > kMembersSliceSeconds + 1.5) {
    std::vector<int> missing;
    Result<std::vector<std::string>> texts = store.gather_slice(prefix, size(), kMembersSliceSeconds, deadline, &missing);
    if (texts.ok() || texts.status().code() != Code::kTimeout || missing.empty()) return texts;
    std::vector<int> ranks;
    for (int index : missing) ranks.push_back(members_[index]);
    KOLO_TRY(left(ranks));
  }
  return store.gather(prefix, size(), deadline);
}

Status Domain::attach(StoreClient& store, const DomainOptions& options, const Deadline& deadline) {
  members_ = options.members;
  my_index_ = options.my_index;
  const int n = size();
  const std::string key = options.key_prefix + "/shm/";
  KOLO_TRY(store.set(str_cat(key, "pid/", my_index_), std::to_string(::getpid()), deadline));
  pids_.assign(n, 0);
  Result<std::vector<std::string>> texts = gather_members(store, str_cat(key, "pid/"), options.left, deadline);
  if (!texts.ok()) return texts.status();
  for (int i = 0; i < n; ++i) {
    Result<pid_t> pid = parse_pid(texts.value()[i]);
    if (!pid.ok()) return error(Code::kInternal, "rank ", members_[i], " announced an ", pid.status().message());
    pids_[i] = pid.value();
  }
  Fd memfd;
  if (my_index_ == 0) {
    geometry_ = SegmentGeometry{static_cast<uint32_t>(n), options.slots, (options.slot_bytes + 63) & ~size_t{63},
                                options.ring_bytes};
    Result<Mapping> mapping = create_shared_memory(geometry_.total_bytes(), &memfd);
    if (!mapping.ok()) return mapping.status();
    mapping_ = mapping.take();
    base_ = mapping_.data();
    SegmentHeader& h = *new (base_) SegmentHeader();
    h.ranks = geometry_.ranks;
    h.slots = geometry_.slots;
    h.slot_bytes = geometry_.slot_bytes;
    h.ring_bytes = geometry_.ring_bytes;
    h.total_bytes = geometry_.total_bytes();
    for (int i = 0; i < n; ++i) new (&control(i)) RankControl();
    // The channels are left as the memfd gives them, zero pages: a zero ChannelControl is
    // head 0, tail 0. Constructing them touched one page per pair (65,536 pages, 256 MiB, at
    // 256 ranks) at start-up; now a pair's page is touched when the pair first talks.
    h.magic = kSegmentMagic;
    Result<FdOffer> offer = FdOffer::open();
    if (!offer.ok()) return offer.status();
    KOLO_TRY(store.set(key + "offer", offer_text(Offer{offer.value().name(), geometry_}), deadline));
    std::vector<pid_t> peers(pids_.begin() + 1, pids_.end());
    KOLO_TRY(offer.value().serve(memfd.get(), peers, deadline));
  } else {
    Result<std::string> text = store.get(key + "offer", deadline);
    if (!text.ok()) return text.status();
    Result<Offer> offer = parse_offer(text.value(), n);
    if (!offer.ok()) return offer.status();
    geometry_ = offer.value().geometry;
    Result<Fd> fd = take_fd(offer.value().name, deadline);
    if (!fd.ok()) return fd.status();
    memfd = fd.take();
    Result<Mapping> mapping = map_shared_memory(memfd.get(), geometry_.total_bytes());
    if (!mapping.ok()) return mapping.status();
    mapping_ = mapping.take();
    base_ = mapping_.data();
    const SegmentHeader& h = header();
    if (h.magic != kSegmentMagic || h.ranks != geometry_.ranks || h.total_bytes != geometry_.total_bytes()) {
      return error(Code::kInternal, "the shared segment does not match its announced geometry");
    }
  }
  RankControl& me = control(my_index_);
  me.probe_address.store(reinterpret_cast<uint64_t>(&kProbeValue), std::memory_order_release);
  me.fenced.store(register_global_fence() ? 1 : 0, std::memory_order_release);
  publish_cpu_mask(me.cpu_mask);
  // The host's copy rate and cache, measured once per domain, by its first rank: the
  // measurement (8 MiB touched, a few 4 MiB copies) cost every rank ~5 ms of CPU at start-up,
  // the same figure 256 times on a host of 256 ranks. The others publish 0 (not measured).
  if (my_index_ == 0) {
    me.copy_mbs.store(std::max<uint64_t>(1, static_cast<uint64_t>(host_rates().copy_gbs * 1000)), std::memory_order_release);
    me.cache_kb.store(std::max<uint64_t>(1, static_cast<uint64_t>(host_rates().cache_bytes / 1024)), std::memory_order_release);
  }
  pidfds_.resize(n);
  for (int i = 0; i < n; ++i) {
    if (i != my_index_) pidfds_[i] = Fd(static_cast<int>(::syscall(SYS_pidfd_open, pids_[i], 0)));
  }
  seen_.assign(n, std::array<uint64_t, kSharedCounters>{});
  next_health_check_.assign(n, 0);
  KOLO_TRY(store.barrier(key + "mapped", n, deadline));
  // The CPUs the ranks may run on together: ranks pinned one per core (kolorun's default)
  // have one CPU each but are not oversubscribed; ranks pinned to the same CPU are.
  agreed_cores_ = 0;
  for (int w = 0; w < kCpuMaskWords; ++w) {
    uint64_t any = 0;
    for (int i = 0; i < n; ++i) any |= control(i).cpu_mask[w].load(std::memory_order_acquire);
    agreed_cores_ += __builtin_popcountll(any);
  }
  agreed_cores_ = std::max(agreed_cores_, 1);
  // What the ranks that measured published (the first; 0 = not measured), the same for all.
  uint64_t slowest = UINT64_MAX, smallest = UINT64_MAX;
  for (int i = 0; i < n; ++i) {
    const uint64_t copy = control(i).copy_mbs.load(std::memory_order_acquire);
    const uint64_t cache = control(i).cache_kb.load(std::memory_order_acquire);
    if (copy != 0) slowest = std::min(slowest, copy);
    if (cache != 0) smallest = std::min(smallest, cache);
  }
  if (slowest == UINT64_MAX || smallest == UINT64_MAX) {
    return error(Code::kInternal, "shared memory: no rank of the host published its copy rate");
  }
  oversubscribed_ = n > agreed_cores_;
  // Plain publishes only where every rank's process takes the sleepers' global fence.
  light_publish_ = true;
  for (int i = 0; i < n; ++i) light_publish_ = light_publish_ && control(i).fenced.load(std::memory_order_acquire) != 0;
  agreed_copy_gbs_ = static_cast<double>(slowest) / 1000;
  agreed_cache_bytes_ = static_cast<double>(smallest) * 1024;
  if (my_index_ == 0) {
    log_info(Subsys::kTransport, "shm: ", n, " ranks on ", agreed_cores_, " cores; the host copies at ", agreed_copy_gbs_,
             " GB/s (measured by its first rank), a cache of ", smallest, " KB",
             light_publish_ ? "; publishes without a fence (the sleepers' membarrier)" : "; publishes fenced");
  }
  KOLO_TRY(probe_cma(options.single_copy));
  KOLO_TRY(store.barrier(key + "probed", n, deadline));
  return Status();
}

// Single-copy transfers need ptrace-level access to the peers (Yama's ptrace_scope,
// containers): try once, and fall back to copying through the shared ring if it fails.
Status Domain::probe_cma(bool wanted) {
  bool readable = wanted;
  for (int i = 0; i < size() && readable; ++i) {
    if (i == my_index_) continue;
    uint64_t value = 0;
    iovec local{&value, sizeof(value)};
    iovec remote{reinterpret_cast<void*>(control(i).probe_address.load(std::memory_order_acquire)), sizeof(value)};
    readable = ::process_vm_readv(pids_[i], &local, 1, &remote, 1, 0) == sizeof(value) && value == kProbeValue;
  }
  control(my_index_).cma_readable.store(readable ? 1 : 0, std::memory_order_release);
  log_info(Subsys::kTransport, "shm: single-copy reads from peers (process_vm_readv) ",
           readable ? "work" : wanted ? "are not permitted; large messages go through the shared ring" : "are off (KOLO_SHM_SINGLE_COPY=0)");
  return Status();
}

Domain::~Domain() = default;

int Domain::index_of(int global_rank) const {
  for (int i = 0; i < size(); ++i) {
    if (members_[i] == global_rank) return i;
  }
  return -1;
}

void Domain::publish(int c, uint64_t value) { publish_word(control(my_index_).line.counters[c], value); }

void Domain::publish_word(std::atomic<uint64_t>& word, uint64_t value) {
  RankControl& me = control(my_index_);
  // No futex word change unless someone sleeps: a sleeper re-checks the word after it
  // counts itself in `sleepers`, and one of the two sees the other (Dekker's pattern). With
  // both sides seq_cst that takes a full fence here, on every publish, which holds the core
  // until the word's line is ours: a peer spinning on it has it, so the fence waits a
  // cache-line transfer that a plain store would leave in the store buffer while this rank
  // goes on to wait for the peers. So where every process of the domain has registered for
  // membarrier's global fence (light_publish_), the fence is the sleeper's instead: after
  // counting itself it makes every CPU running one of these processes fence
  // (sleep_fence), so either this publish's load below comes after that fence and sees the
  // sleeper, or the store came before it and the sleeper's re-check sees the word.
  // (The busy path touches only the word's line, which the peers read anyway.)
  if (light_publish_) {
    word.store(value, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order; the CPU may not
  } else {
    word.store(value, std::memory_order_seq_cst);
  }
  if (me.bell.sleepers.load(light_publish_ ? std::memory_order_relaxed : std::memory_order_seq_cst) != 0) {
    me.bell.word.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&me.bell.word);
  }
}

void Domain::ring_inbox(int index) { ring_bell(control(index).inbox); }

// MEMBARRIER_CMD_GLOBAL_EXPEDITED (Linux 4.16): a full memory barrier on every CPU running
// a thread of a process that registered for it, before the call returns. Registered at
// the domain's creation; a kernel or a sandbox without it keeps the seq_cst publishes.
bool Domain::register_global_fence() {
  const long supported = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ||
      (supported & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0) {
    return false;
  }
  return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0) == 0;
}

// A sleeper's side of publish_word's pattern: only before a futex wait, after spinning
// for kSpinSeconds, so its system call costs nothing to the fast path.
void Domain::sleep_fence() {
  if (light_publish_) (void)::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0);
}

void Domain::sleep_on_inbox(uint32_t seen, int timeout_ms) {
  Bell& inbox = control(my_index_).inbox;
  inbox.sleepers.fetch_add(1, std::memory_order_seq_cst);
  futex_wait(&inbox.word, seen, timeout_ms);
  inbox.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

template <class Ready>
Status Domain::wait_on(Bell& bell, Ready ready, const Deadline& deadline, const char* what, int peer,
                       const StallCheck* stall) {
  if (ready()) return Status();
  if (oversubscribed_) {
    for (int i = 0; i < kYieldSpins; ++i) {
      sched_yield();
      if (ready()) return Status();
    }
  } else {
    // Pause-spin first (a peer on another core answers within a microsecond or two), then
    // yield while spinning: on a busy machine the peer may be waiting for our core.
    double until = 0;  // read the clock only once the wait is not short
    for (int i = 1;; ++i) {
      if (i < kTightPolls) {
        // poll again at once
      } else if (i < kPauseSpins) {
        cpu_relax();
      } else {
        sched_yield();
      }
      if (ready()) return Status();
      if ((i & 63) == 0) {
        if (until == 0) {
          until = now_seconds() + kSpinSeconds;
        } else if (now_seconds() > until) {
          break;
        }
      }
    }
  }
  // A deadline from its first question (support/clock.h) starts here, where the wait stops
  // spinning: until then it has read no clock, and a call whose wait never got here says so
  // (Deadline::asked, which the flight recorder's small-call lane reads).
  (void)deadline.at();
  while (true) {
    if (stall != nullptr) KOLO_TRY((*stall)(peer));
    const uint32_t seen = bell.word.load(std::memory_order_seq_cst);
    bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    sleep_fence();  // publish_word says why
    if (ready()) {
      bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      return Status();
    }
    futex_wait(&bell.word, seen, kFutexSleepMs);
    bell.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (ready()) return Status();
    Status healthy = health(peer);
    // A peer may arrive and then exit (its last call done) between the two looks.
    if (!healthy.ok()) return ready() ? Status() : healthy.with_context(str_cat(what, ": "));
    if (deadline.expired()) {
      return error(Code::kTimeout, what, ": rank ", members_[peer], " did not arrive in time (KOLO_TIMEOUT)");
    }
  }
}

Status Domain::wait_for(int index, int c, uint64_t at_least, const Deadline& deadline, const char* what,
                        const StallCheck& stall) {
  std::array<uint64_t, kSharedCounters>& seen = seen_[index];
  if (seen[c] >= at_least) return Status();
  std::atomic<uint64_t>* counters = control(index).line.counters;
  auto ready = [&] {
    const uint64_t value = counters[c].load(std::memory_order_acquire);
    if (value < at_least) return false;
    // The line is in our cache now: note the other counters too.
    for (int k = 0; k < kSharedCounters; ++k) seen[k] = std::max(seen[k], counters[k].load(std::memory_order_acquire));
    seen[c] = value;
    return true;
  };
  return wait_on(control(index).bell, ready, deadline, what, index, &stall);
}

Status Domain::wait_word(int index, const std::atomic<uint64_t>& word, uint64_t at_least, const Deadline& deadline,
                         const char* what, const StallCheck& stall) {
  auto ready = [&] { return word.load(std::memory_order_acquire) >= at_least; };
  return wait_on(control(index).bell, ready, deadline, what, index, &stall);
}

Status Domain::wait_for_all(int c, uint64_t at_least, const Deadline& deadline, const char* what,
                            const StallCheck& stall) {
  for (int i = 0; i < size(); ++i) {
    if (i != my_index_) KOLO_TRY(wait_for(i, c, at_least, deadline, what, stall));
  }
  return Status();
}

// Whether the process of member `index` has exited (its pidfd turns readable).
bool Domain::exited(int index) const {
  if (pidfds_[index].valid()) {
    pollfd p{pidfds_[index].get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
  }
  return ::kill(pids_[index], 0) != 0 && errno == ESRCH;
}

Status Domain::members_alive() const {
  const SegmentHeader& h = header();
  if (h.failed.load(std::memory_order_acquire) != 0) {
    return failed_status();
  }
  for (int i = 0; i < static_cast<int>(pids_.size()); ++i) {
    if (i != my_index_ && exited(i)) {
      return error(Code::kRemote, "rank ", members_[i], " (pid ", pids_[i], ") on this host exited");
    }
  }
  return Status();
}

Status Domain::health(int index) {
  if (aborted_.load(std::memory_order_relaxed)) return error(Code::kAborted, "communicator aborted by kolo_comm_abort");
  const SegmentHeader& h = header();
  if (h.failed.load(std::memory_order_acquire) != 0) {
    return failed_status();
  }
  const double t = now_seconds();
  if (index == my_index_ || t < next_health_check_[index]) return Status();
  next_health_check_[index] = t + kHealthPeriod;
  if (exited(index)) return error(Code::kRemote, "rank ", members_[index], " (pid ", pids_[index], ") on this host exited");
  return Status();
}

Status Domain::failed_status() const {
  const SegmentHeader& h = header();
  const bool exited = h.failed_exited.load(std::memory_order_acquire) != 0;
  std::string why;
  if (!exited && h.failed_why_ready.load(std::memory_order_acquire) != 0) {
    why = std::string(h.failed_why, strnlen(h.failed_why, sizeof(h.failed_why)));
  }
  return error(Code::kRemote, "rank ", h.failed_rank.load(std::memory_order_acquire), " on this host ",
               exited ? "exited" : "failed", why.empty() ? "" : " (", why, why.empty() ? "" : ")");
}

void Domain::mark_failed(const std::string& why) {
  SegmentHeader& h = header();
  // The cause, when a member has exited: the host's other ranks name it, not this rank,
  // which may only have seen its exit (once per failure: a pidfd poll per member).
  int32_t cause = members_[my_index_];
  bool exited_cause = false;
  for (int i = 0; i < size() && !exited_cause; ++i) {
    if (i != my_index_ && exited(i)) cause = members_[i], exited_cause = true;
  }
  int32_t expected = -1;
  if (h.failed_rank.compare_exchange_strong(expected, cause)) {
    if (exited_cause) h.failed_exited.store(1, std::memory_order_release);
    // What the first to fail saw, for the others' errors (written once, by the CAS's winner).
    const size_t n = std::min(why.size(), sizeof(h.failed_why) - 1);
    std::memcpy(h.failed_why, why.data(), n);
    h.failed_why[n] = '\0';
    h.failed_why_ready.store(1, std::memory_order_release);
  }
  h.failed.store(1, std::memory_order_release);
  for (int i = 0; i < size(); ++i) {
    ring_bell(control(i).bell);
    ring_bell(control(i).inbox);
  }
}

void Domain::abort() {
  aborted_.store(true, std::memory_order_relaxed);
  ring_bell(control(my_index_).inbox);
}

}  // namespace kolo::shm
