#include "transport/tag_matcher.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace kolo {

Status TagMatcher::find(uint64_t tag, uint64_t bytes, PostedRecv** match) {
  *match = nullptr;
  for (PostedRecv& recv : posted_) {
    if (recv.tag != tag) continue;
    if (recv.bytes != bytes) return size_mismatch(tag, bytes, recv.bytes);
    *match = &recv;
    break;
  }
  return Status();
}

void TagMatcher::remove(PostedRecv* recv) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (&*it == recv) {
      posted_.erase(it);
      return;
    }
  }
}

Result<EarlyFrame*> TagMatcher::add_early(uint64_t tag, uint64_t bytes, uint64_t allocate) {
  EarlyFrame frame;
  frame.tag = tag;
  frame.bytes = bytes;
  try {
    frame.data.resize(std::min(bytes, allocate));
  } catch (const std::bad_alloc&) {
    return error(Code::kSystem, "out of memory buffering an early message of ", bytes, " bytes from rank ", peer_);
  }
  early_.push_back(std::move(frame));
  early_bytes_ += bytes;
  return &early_.back();
}

Status TagMatcher::grow(EarlyFrame* frame) const {
  const uint64_t size = std::min<uint64_t>(frame->bytes, std::max<uint64_t>(2 * frame->data.size(), kEarlyChunkBytes));
  try {
    frame->data.resize(size);
  } catch (const std::bad_alloc&) {
    return error(Code::kSystem, "out of memory buffering an early message of ", frame->bytes, " bytes from rank ", peer_);
  }
  return Status();
}

void TagMatcher::add_rendezvous(uint64_t tag, uint64_t bytes, uint64_t address) {
  EarlyFrame frame;
  frame.tag = tag;
  frame.bytes = bytes;
  frame.complete = true;
  frame.rendezvous = true;
  frame.address = address;
  early_.push_back(std::move(frame));
}

Status TagMatcher::complete_last() {
  EarlyFrame& frame = early_.back();
  frame.complete = true;
  PostedRecv* match = nullptr;
  KOLO_TRY(find(frame.tag, frame.bytes, &match));
  if (match == nullptr) return Status();
  copy(frame, *match);
  remove(match);
  if (!frame.rendezvous) early_bytes_ -= frame.bytes;
  early_.pop_back();
  return Status();
}

void TagMatcher::fail(const Status& status) {
  for (PostedRecv& recv : posted_) {
    if (recv.req != nullptr && !recv.req->done) {
      recv.req->status = status;
      recv.req->done = true;
    }
  }
  posted_.clear();
}

Status TagMatcher::size_mismatch(uint64_t tag, size_t sent, size_t expected) const {
  return error(Code::kMismatch, "rank ", peer_, " sent ", sent, " bytes for tag ", tag, " but rank ", self_,
               " expects ", expected, ": the ranks called different collectives or counts");
}

void TagMatcher::copy(const EarlyFrame& frame, const PostedRecv& recv) {
  if (recv.bytes > 0) std::memcpy(recv.data, frame.data.data(), recv.bytes);
  recv.req->done = true;
}

}  // namespace kolo
