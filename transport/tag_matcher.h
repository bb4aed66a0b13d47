// Tag matching for a Link, written once for every transport. Receives posted before their
// frame arrives wait in order; frames that arrive before their receive wait in the
// unexpected ("early") queue, so two ranks sending to each other at once never deadlock.
// A receive matches the earliest frame from the peer with its tag; sizes must agree.
//
// The link reads its wire and asks: on a frame's header, find() the posted receive (or
// add_early() / add_rendezvous() when there is none); once an early frame's payload is
// whole, complete_last(). post() is the link's post_recv.
#pragma once

#include <cstdint>
#include <list>
#include <vector>

#include "support/status.h"
#include "transport/link.h"

namespace kolo {

struct PostedRecv {
  uint64_t tag;
  char* data;
  size_t bytes;
  TransferRequest* req;
};

// A frame that arrived before its receive. Its payload is either here (`data`, filled as
// it arrives) or, for a rendezvous frame, still in the sender's memory at `address`, for
// the link to fetch when the receive comes.
struct EarlyFrame {
  uint64_t tag = 0;
  uint64_t bytes = 0;
  std::vector<char> data;
  bool complete = false;  // only the last frame can still be arriving
  bool rendezvous = false;
  uint64_t address = 0;
};

class TagMatcher {
 public:
  // Communicator ranks, for the error messages.
  TagMatcher(int self, int peer) : self_(self), peer_(peer) {}

  // A link's post_recv: hands the earliest whole early frame with this tag (sizes checked)
  // to deliver(const EarlyFrame&, const PostedRecv&) -> Status, and drops the frame when
  // that succeeds. With none, the receive waits, unless the link has `failed` (frames that
  // arrived before it failed are still delivered).
  template <class Deliver>
  Status post(const PostedRecv& recv, const Status& failed, Deliver&& deliver) {
    recv.req->done = false;
    recv.req->status = Status();
    for (auto it = early_.begin(); it != early_.end(); ++it) {
      if (it->tag != recv.tag || !it->complete) continue;
      if (it->bytes != recv.bytes) return size_mismatch(recv.tag, it->bytes, recv.bytes);
      KOLO_TRY(deliver(*it, recv));
      if (!it->rendezvous) early_bytes_ -= it->bytes;
      early_.erase(it);
      return Status();
    }
    if (!failed.ok()) return failed;
    posted_.push_back(recv);
    return Status();
  }

  // A frame's header arrived: *match is the earliest posted receive with its tag (still
  // posted; remove() it when taken), or null. A size that disagrees is an error.
  Status find(uint64_t tag, uint64_t bytes, PostedRecv** match);
  void remove(PostedRecv* recv);
  // No receive for the frame: keep it; its payload is to be read into the frame's data,
  // of which the first `allocate` bytes (at most `bytes`) are allocated now. A link whose
  // peer could claim a huge frame allocates a little and grows the data as bytes arrive.
  Result<EarlyFrame*> add_early(uint64_t tag, uint64_t bytes, uint64_t allocate = UINT64_MAX);
  // An early frame's data starts at kEarlyChunkBytes and doubles as its payload arrives, up
  // to the frame's size, so that a header claiming a huge frame costs only what was sent.
  static constexpr uint64_t kEarlyChunkBytes = uint64_t{1} << 20;
  // Room for more of the frame's payload: its data grown by that rule.
  Status grow(EarlyFrame* frame) const;
  // No receive for a rendezvous frame (payload at the sender's `address`): keep it, whole.
  void add_rendezvous(uint64_t tag, uint64_t bytes, uint64_t address);
  // The last early frame is whole: hand it to a receive posted meanwhile, if any.
  Status complete_last();

  bool has_posted() const { return !posted_.empty(); }
  // Payload bytes held in early frames (rendezvous frames hold none here).
  uint64_t early_bytes() const { return early_bytes_; }
  // The link died: every posted receive fails with `status` (early frames stay).
  void fail(const Status& status);
  Status size_mismatch(uint64_t tag, size_t sent, size_t expected) const;
  // Copies a whole early frame into its receive and completes it.
  static void copy(const EarlyFrame& frame, const PostedRecv& recv);

 private:
  int self_, peer_;
  std::list<PostedRecv> posted_;
  std::list<EarlyFrame> early_;
  uint64_t early_bytes_ = 0;
};

}  // namespace kolo
