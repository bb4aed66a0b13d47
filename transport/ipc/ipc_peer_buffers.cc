#include "transport/ipc/ipc_peer_buffers.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iterator>

#include "support/log.h"

namespace kolo {
namespace {

// What a rank posts in its exchange area, in one of two halves by the exchange's parity: a
// rank writes exchange k + 2 only after every peer has posted k + 1, which each does after
// reading all of exchange k. Plain fields, published by the rank's exchange word (release)
// and read after waiting for it (acquire).
struct Posted {
  uint64_t id;           // the allocation's (DeviceAllocation::id)
  uint64_t base;         // the allocation's address in its owner's process
  uint64_t alloc_bytes;  // and its size
  uint64_t offset;       // of the buffer in the allocation
  uint64_t bytes;        // what peers read from there
  uint32_t has_handle;   // the allocation is new to some peer: map it
  uint32_t pad;
  device::IpcHandle handle;
};

struct Post {
  int64_t pid;
  uint32_t ok;      // every buffer of this rank can be shared
  uint32_t n;
  uint32_t mapped;  // second round: this rank mapped every new allocation
  uint32_t registered;  // this rank's buffers are in registered windows
  Posted buffers[PeerBuffers::kMaxBuffers];
};
// A rank's exchange area: its word (2k: exchange k posted; 2k + 1: its second round), on a
// line of its own, then the two posts.
constexpr size_t kPostsAt = 64;
static_assert(kPostsAt + 2 * sizeof(Post) <= kExchangeAreaBytes, "two exchanges' posts fit a rank's exchange area");

Post& post_of(SharedDomain& d, int index, uint64_t seq) {
  return reinterpret_cast<Post*>(d.exchange_area(index) + kPostsAt)[seq % 2];
}

std::atomic<uint64_t>& word_of(SharedDomain& d, int index) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(d.exchange_area(index));
}

// The domain's waits notice dead and failed peers and kolo_comm_abort themselves.
struct NoStall final : SharedDomain::StallCheck {
  Status operator()(int) const override { return Status(); }
};

bool overlap(uintptr_t a, size_t a_bytes, uintptr_t b, size_t b_bytes) { return a < b + b_bytes && b < a + a_bytes; }

}  // namespace

PeerBuffers::~PeerBuffers() {
  for (auto& [key, import] : imports_) {
    if (!import.owned) continue;
    Status s = dev_.ipc_close(import.mapped);
    if (!s.ok()) log_warn(Subsys::kExec, "closing a peer's buffer mapping: ", s.message());
  }
}

// A peer's allocation made where one of its earlier ones lay: the earlier one was freed,
// so its mapping goes (never read again: the call that read it last ended before its owner
// could free it).
void PeerBuffers::close_overlapping(int peer, uint64_t id, uintptr_t base, size_t bytes) {
  for (auto it = imports_.begin(); it != imports_.end();) {
    const bool stale = it->first.first == peer && it->first.second != id &&
                       overlap(it->second.base, it->second.bytes, base, bytes);
    if (!stale) {
      ++it;
      continue;
    }
    if (it->second.owned) {
      Status s = dev_.ipc_close(it->second.mapped);
      if (!s.ok()) log_warn(Subsys::kExec, "closing a freed peer buffer's mapping: ", s.message());
    }
    it = imports_.erase(it);
  }
}

Result<bool> PeerBuffers::exchange(const Buffer* mine, int n, bool registered, const Deadline& deadline,
                                   std::vector<char*> at[]) {
  if (n < 0 || n > kMaxBuffers) return error(Code::kInternal, "peer buffers: ", n, " buffers");
  if (registered) n = 0;
  const int me = shared_.index(), ranks = shared_.size();
  const uint64_t seq = ++seq_;
  const int64_t pid = static_cast<int64_t>(::getpid());
  Post& own = post_of(shared_, me, seq);
  std::memset(static_cast<void*>(&own), 0, sizeof(own));
  own.pid = pid;
  own.n = static_cast<uint32_t>(n);
  own.ok = 1;
  own.registered = registered ? 1 : 0;
  for (int b = 0; b < n && own.ok; ++b) {
    device::DeviceAllocation a;
    Posted& p = own.buffers[b];
    const auto ptr = reinterpret_cast<uintptr_t>(mine[b].ptr);
    if (!dev_.allocation_of(mine[b].ptr, &a).ok() || ptr + mine[b].bytes > reinterpret_cast<uintptr_t>(a.base) + a.bytes) {
      own.ok = 0;  // not memory CUDA IPC exports: read through the slots, on every rank
      break;
    }
    p = Posted{a.id, reinterpret_cast<uintptr_t>(a.base), a.bytes, ptr - reinterpret_cast<uintptr_t>(a.base),
               mine[b].bytes, 0, 0, {}};
    if (exported_.count(a.id) == 0) {
      if (!dev_.ipc_export(a.base, &p.handle).ok()) own.ok = 0;
      p.has_handle = 1;
    }
  }
  const NoStall stall;
  shared_.publish_word(word_of(shared_, me), 2 * seq);
  for (int r = 0; r < ranks; ++r) {
    if (r != me) {
      KOLO_TRY(shared_.wait_word(r, word_of(shared_, r), 2 * seq, deadline,
                                 "peers' device buffers", stall));
    }
  }
  // Every rank reads the same posts, so every rank decides alike from here on.
  bool ok = true, any_new = false;
  for (int r = 0; r < ranks; ++r) {
    const Post& p = post_of(shared_, r, seq);
    ok = ok && p.ok && !p.registered && p.n == own.n;
    for (int b = 0; ok && b < n; ++b) {
      // A peer's post is memory it writes: its extents are checked before any is used (a
      // buffer must lie inside the allocation it names), alike on every rank.
      const Posted& q = p.buffers[b];
      ok = q.bytes == own.buffers[b].bytes && q.offset <= q.alloc_bytes && q.bytes <= q.alloc_bytes - q.offset;
      any_new = any_new || q.has_handle;
    }
  }
  if (!ok || n == 0) return false;
  bool mapped = true;
  for (int b = 0; b < n; ++b) at[b].assign(ranks, nullptr);
  for (int r = 0; r < ranks; ++r) {
    const Post& p = post_of(shared_, r, seq);
    for (int b = 0; b < n; ++b) {
      const Posted& q = p.buffers[b];
      if (r == me) {
        at[b][r] = const_cast<char*>(static_cast<const char*>(mine[b].ptr));
        continue;
      }
      auto found = imports_.find({r, q.id});
      if (found == imports_.end() && (p.pid == pid || q.has_handle)) {
        close_overlapping(r, q.id, q.base, q.alloc_bytes);
        Import in{reinterpret_cast<char*>(q.base), q.base, q.alloc_bytes, p.pid != pid};
        void* where = nullptr;
        if (in.owned) {
          Status s = dev_.ipc_import(q.handle, &where);
          if (!s.ok()) {
            log_warn(Subsys::kExec, "rank ", shared_.global_rank(me), ": cannot map rank ", shared_.global_rank(r),
                     "'s buffer (it is read through the slots): ", s.message());
            mapped = false;
            continue;
          }
          in.mapped = static_cast<char*>(where);
        }
        found = imports_.emplace(std::make_pair(r, q.id), in).first;
      }
      if (found == imports_.end()) {
        mapped = false;  // a peer took it as mapped here, and it is not: the second round says so
        continue;
      }
      at[b][r] = found->second.mapped + q.offset;
    }
  }
  if (!any_new) {
    // Nothing new to any rank: every buffer was mapped by a round that all ranks passed.
    if (!mapped) return error(Code::kInternal, "rank ", shared_.global_rank(me), ": a peer's buffer taken as mapped is not");
    return true;
  }
  // Whether every rank mapped what was new (any_new is the same on every rank: all take
  // this round together).
  own.mapped = mapped ? 1 : 0;
  shared_.publish_word(word_of(shared_, me), 2 * seq + 1);
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    KOLO_TRY(shared_.wait_word(r, word_of(shared_, r), 2 * seq + 1, deadline,
                               "peers' device buffer mappings", stall));
    mapped = mapped && post_of(shared_, r, seq).mapped;
  }
  if (!mapped) return false;
  for (int b = 0; b < n; ++b) {
    const Posted& q = own.buffers[b];
    if (!q.has_handle) continue;
    // Allocations freed since they were exported lay where this one lies.
    for (auto it = exported_.begin(); it != exported_.end();) {
      it = overlap(it->second.first, it->second.second, q.base, q.alloc_bytes) ? exported_.erase(it) : std::next(it);
    }
    exported_[q.id] = {q.base, q.alloc_bytes};
  }
  return true;
}

}  // namespace kolo
