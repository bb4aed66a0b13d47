#include "transport/shm/shm_link.h"

#include <errno.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace kolo::shm {
namespace {
// The peer shares our memory and our trust, but a corrupt length must not make us
// allocate wildly: besides this bound, an early frame's buffer grows only as its payload
// arrives.
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 40;
}  // namespace

ShmLink::ShmLink(Domain& domain, int self, int peer)
    : domain_(domain), self_(self), peer_(peer), peer_index_(domain.index_of(peer)),
      out_(domain.channel(domain.index(), peer_index_)), out_ring_(domain.ring(domain.index(), peer_index_)),
      in_(domain.channel(peer_index_, domain.index())), in_ring_(domain.ring(peer_index_, domain.index())),
      single_copy_(domain.control(peer_index_).cma_readable.load(std::memory_order_acquire) != 0),
      matcher_(self, peer) {
  out_head_ = out_.head.load(std::memory_order_acquire);
  in_tail_ = in_.tail.load(std::memory_order_acquire);
}

ShmLink::~ShmLink() { close(); }

Status ShmLink::post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) {
  if (!failed_.ok()) return failed_;
  req->done = false;
  req->status = Status();
  const bool rts = single_copy_ && bytes >= kSingleCopyBytes;
  FrameHeader header{tag, bytes, rts ? reinterpret_cast<uint64_t>(data) : 0, rts ? kRequestToSend : kData, 0};
  sends_.push_back(PendingSend{header, static_cast<const char*>(data), req});
  return Status();
}

Status ShmLink::post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) {
  return matcher_.post(PostedRecv{tag, static_cast<char*>(data), bytes, req}, failed_,
                       [&](const EarlyFrame& frame, const PostedRecv& recv) -> Status {
                         if (!frame.rendezvous) {
                           TagMatcher::copy(frame, recv);
                           return Status();
                         }
                         KOLO_TRY(read_remote(frame.address, recv.data, recv.bytes));
                         acknowledge(recv.tag, recv.req);  // done once the acknowledgement is out
                         return Status();
                       });
}

Status ShmLink::progress() {
  if (!failed_.ok()) return Status();  // its requests have already failed
  bool moved = false;
  KOLO_TRY(progress_recvs(&moved));
  KOLO_TRY(progress_sends(&moved));
  if (!moved && has_pending()) {
    Status healthy = domain_.health(peer_index_);
    if (!healthy.ok()) {
      // What a peer wrote before it exited (its last call done) is still read.
      KOLO_TRY(progress_recvs(&moved));
      if (!moved) return fail(healthy);
    }
  }
  return Status();
}

void ShmLink::write_ring(const char* in, size_t bytes) {
  const size_t size = domain_.ring_bytes(), at = out_head_ & (size - 1);
  const size_t first = std::min(bytes, size - at);
  std::memcpy(out_ring_ + at, in, first);
  std::memcpy(out_ring_, in + first, bytes - first);
  out_head_ += bytes;
}

void ShmLink::read_ring(char* out, size_t bytes) {
  const size_t size = domain_.ring_bytes(), at = in_tail_ & (size - 1);
  const size_t first = std::min(bytes, size - at);
  if (out != nullptr) {
    std::memcpy(out, in_ring_ + at, first);
    std::memcpy(out + first, in_ring_, bytes - first);
  }
  in_tail_ += bytes;
}

// The peer writes head; a value that claims more than the ring holds is corruption, and
// trusting it would copy past the ring.
Result<size_t> ShmLink::readable() const {
  const uint64_t head = in_.head.load(std::memory_order_acquire);
  if (head < in_tail_ || head - in_tail_ > domain_.ring_bytes()) {
    return error(Code::kInternal, "corrupt ring from rank ", peer_, " (head ", head, ", tail ", in_tail_, ")");
  }
  return static_cast<size_t>(head - in_tail_);
}

void ShmLink::acknowledge(uint64_t tag, TransferRequest* recv) {
  acks_.push_back(PendingSend{FrameHeader{tag, 0, 0, kAck, 0}, nullptr, recv});
}

Status ShmLink::progress_sends(bool* moved) {
  const uint64_t start = out_head_;
  while (true) {
    // An acknowledgement may only go between frames, never inside a payload.
    const bool mid_frame = !sends_.empty() && sends_.front().sent > 0;
    std::deque<PendingSend>& queue = !mid_frame && !acks_.empty() ? acks_ : sends_;
    if (queue.empty()) break;
    PendingSend& s = queue.front();
    const uint64_t tail = out_.tail.load(std::memory_order_acquire);
    if (tail > out_head_ || out_head_ - tail > domain_.ring_bytes()) {
      return fail(error(Code::kInternal, "corrupt ring to rank ", peer_, " (head ", out_head_, ", tail ", tail, ")"));
    }
    const size_t space = domain_.ring_bytes() - (out_head_ - tail);
    const size_t header_bytes = sizeof(FrameHeader);
    const size_t total = header_bytes + (s.header.kind == kData ? s.header.bytes : 0);
    if (s.sent == 0) {
      if (space < header_bytes) break;
      write_ring(reinterpret_cast<const char*>(&s.header), header_bytes);
      s.sent = header_bytes;
    } else {
      const size_t n = std::min(space, total - s.sent);
      if (n == 0) break;
      write_ring(s.data + (s.sent - header_bytes), n);
      s.sent += n;
    }
    if (s.sent < total) continue;
    if (s.header.kind == kRequestToSend) {
      awaiting_ack_.push_back(s);
    } else if (s.req != nullptr) {
      s.req->done = true;
    }
    queue.pop_front();
  }
  if (out_head_ != start) {
    out_.head.store(out_head_, std::memory_order_release);
    domain_.ring_inbox(peer_index_);
    *moved = true;
  }
  return Status();
}

Status ShmLink::progress_recvs(bool* moved) {
  const uint64_t start = in_tail_;
  Status status;
  while (status.ok()) {
    Result<size_t> readable_now = readable();
    if (!readable_now.ok()) {
      status = readable_now.status();
      break;
    }
    const size_t available = readable_now.value();
    if (!in_payload_) {
      if (available < sizeof(FrameHeader)) break;
      read_ring(reinterpret_cast<char*>(&in_header_), sizeof(FrameHeader));
      status = on_header();
      continue;
    }
    if (in_early_ != nullptr && in_got_ == in_early_->data.size() && in_got_ < in_header_.bytes) {
      status = grow_early();
      if (!status.ok()) break;
    }
    const size_t room = (in_early_ != nullptr ? in_early_->data.size() : in_header_.bytes) - in_got_;
    const size_t n = std::min(available, room);
    if (n == 0 && in_got_ < in_header_.bytes) break;
    read_ring(in_target_ + in_got_, n);
    in_got_ += n;
    if (in_got_ < in_header_.bytes) continue;
    in_payload_ = false;
    in_early_ = nullptr;
    if (in_req_ != nullptr) {
      in_req_->done = true;
    } else {
      status = matcher_.complete_last();
    }
  }
  if (in_tail_ != start) {
    in_.tail.store(in_tail_, std::memory_order_release);
    domain_.ring_inbox(peer_index_);  // the sender may wait for space
    *moved = true;
  }
  return status.ok() ? status : fail(status);
}

Status ShmLink::on_header() {
  const FrameHeader& h = in_header_;
  if (h.kind == kAck) {
    auto it = std::find_if(awaiting_ack_.begin(), awaiting_ack_.end(), [&](const PendingSend& s) { return s.header.tag == h.tag; });
    if (it == awaiting_ack_.end()) return error(Code::kInternal, "rank ", peer_, " acknowledged tag ", h.tag, " that was not sent");
    it->req->done = true;
    awaiting_ack_.erase(it);
    return Status();
  }
  if ((h.kind != kData && h.kind != kRequestToSend) || h.bytes > kMaxFrameBytes) {
    return error(Code::kInternal, "corrupt frame from rank ", peer_, " (kind ", h.kind, ", ", h.bytes, " bytes)");
  }
  PostedRecv* match = nullptr;
  KOLO_TRY(matcher_.find(h.tag, h.bytes, &match));
  if (h.kind == kRequestToSend) {
    if (match == nullptr) {
      matcher_.add_rendezvous(h.tag, h.bytes, h.address);
      return Status();
    }
    KOLO_TRY(read_remote(h.address, match->data, h.bytes));
    acknowledge(h.tag, match->req);
    matcher_.remove(match);
    return Status();
  }
  in_payload_ = true;
  in_got_ = 0;
  EarlyFrame* early = nullptr;
  if (match != nullptr) {
    in_target_ = match->data;
    in_req_ = match->req;
    in_early_ = nullptr;
    matcher_.remove(match);
  } else {
    Result<EarlyFrame*> added = matcher_.add_early(h.tag, h.bytes, TagMatcher::kEarlyChunkBytes);
    if (!added.ok()) return added.status();
    early = added.value();
    in_early_ = early;
    in_target_ = early->data.data();
    in_req_ = nullptr;
  }
  if (h.bytes == 0) {
    in_payload_ = false;
    in_early_ = nullptr;
    if (in_req_ != nullptr) in_req_->done = true; else early->complete = true;
  }
  return Status();  // (a complete empty frame has no receive posted: find looked)
}

Status ShmLink::grow_early() {
  Status grown = matcher_.grow(in_early_);
  if (!grown.ok()) return grown;
  in_target_ = in_early_->data.data();
  return Status();
}

Status ShmLink::read_remote(uint64_t address, char* data, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{data + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    ssize_t n = ::process_vm_readv(domain_.pid(peer_index_), &local, 1, &remote, 1, 0);
    if (n <= 0) {
      return error(Code::kRemote, "single-copy read of ", bytes, " B from rank ", peer_, " failed: ",
                   n < 0 ? std::strerror(errno) : "no progress");
    }
    done += static_cast<size_t>(n);
  }
  // A sender that failed meanwhile may have handed its buffer back to its caller: what we
  // read may be anything. It marks the domain failed before it returns, so look again.
  return domain_.health(peer_index_);
}

Status ShmLink::fail(Status status) {
  if (failed_.ok()) failed_ = status;
  auto fail_request = [&](TransferRequest* req) {
    if (req != nullptr && !req->done) {
      req->status = failed_;
      req->done = true;
    }
  };
  for (PendingSend& s : sends_) fail_request(s.req);
  for (PendingSend& s : acks_) fail_request(s.req);
  for (PendingSend& s : awaiting_ack_) fail_request(s.req);
  matcher_.fail(failed_);
  if (in_payload_) fail_request(in_req_);
  sends_.clear();
  acks_.clear();
  awaiting_ack_.clear();
  in_payload_ = false;
  return failed_;
}

void ShmLink::close() {
  if (failed_.ok()) (void)fail(error(Code::kAborted, "link to rank ", peer_, " closed"));
}

}  // namespace kolo::shm
