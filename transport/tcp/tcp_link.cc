#include "transport/tcp/tcp_link.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "support/log.h"

namespace kolo {
namespace {
// A peer is authenticated, but a corrupt length must still not make us allocate wildly:
// besides this bound, an early frame's buffer grows only as its payload arrives.
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 40;
// Early frames this rank keeps from one peer before it leaves the rest in the socket
// (while it has no receive posted on the link): what a peer running ahead may cost.
constexpr uint64_t kEarlyBytesLimit = uint64_t{64} << 20;
}  // namespace

TcpLink::TcpLink(int self, int peer, Fd fd) : self_(self), peer_(peer), fd_(std::move(fd)), matcher_(self, peer) {
  (void)set_nonblocking(fd_.get(), true);
  (void)set_nodelay(fd_.get());
  int buffer = 4 << 20;
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
}

TcpLink::~TcpLink() { close(); }

short TcpLink::poll_events() const {
  return static_cast<short>((throttled() ? 0 : POLLIN) | (sends_.empty() ? 0 : POLLOUT));
}

bool TcpLink::throttled() const {
  return !in_payload_ && in_header_got_ == 0 && !matcher_.has_posted() && matcher_.early_bytes() >= kEarlyBytesLimit;
}

Status TcpLink::post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) {
  if (!failed_.ok()) return failed_;
  req->done = false;
  req->status = Status();
  sends_.push_back(PendingSend{FrameHeader{tag, bytes}, static_cast<const char*>(data), 0, req});
  return Status();
}

Status TcpLink::post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) {
  Status status = matcher_.post(PostedRecv{tag, static_cast<char*>(data), bytes, req}, failed_,
                                [](const EarlyFrame& frame, const PostedRecv& recv) {
                                  TagMatcher::copy(frame, recv);
                                  return Status();
                                });
  if (status.code() == Code::kMismatch) return fail(status);
  return status;
}

Status TcpLink::progress() {
  if (!failed_.ok()) return Status();  // its requests have already failed
  KOLO_TRY(progress_sends());
  return progress_recvs();
}

Status TcpLink::progress_sends() {
  while (!sends_.empty()) {
    PendingSend& s = sends_.front();
    const size_t header_bytes = sizeof(FrameHeader);
    iovec iov[2];
    int n_iov = 0;
    if (s.sent < header_bytes) {
      iov[n_iov++] = {reinterpret_cast<char*>(&s.header) + s.sent, header_bytes - s.sent};
      if (s.header.bytes > 0) iov[n_iov++] = {const_cast<char*>(s.data), s.header.bytes};
    } else {
      size_t done = s.sent - header_bytes;
      iov[n_iov++] = {const_cast<char*>(s.data) + done, s.header.bytes - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n_iov;
    ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status();
      return fail(error(Code::kRemote, "connection to rank ", peer_, " lost while sending: ", std::strerror(errno)));
    }
    s.sent += static_cast<size_t>(n);
    if (s.sent == header_bytes + s.header.bytes) {
      s.req->done = true;
      sends_.pop_front();
    }
  }
  return Status();
}

Status TcpLink::start_payload() {
  if (in_header_.bytes > kMaxFrameBytes) {
    return fail(error(Code::kRemote, "rank ", peer_, " sent a frame of ", in_header_.bytes, " bytes; limit is ",
                      kMaxFrameBytes));
  }
  in_payload_ = true;
  in_got_ = 0;
  PostedRecv* match = nullptr;
  Status status = matcher_.find(in_header_.tag, in_header_.bytes, &match);
  if (!status.ok()) return fail(status);
  if (match != nullptr) {
    in_target_ = match->data;
    in_req_ = match->req;
    in_early_ = nullptr;
    matcher_.remove(match);
    return Status();
  }
  Result<EarlyFrame*> early = matcher_.add_early(in_header_.tag, in_header_.bytes, TagMatcher::kEarlyChunkBytes);
  if (!early.ok()) return fail(early.status());
  in_early_ = early.value();
  in_target_ = in_early_->data.data();
  in_req_ = nullptr;
  return Status();
}

Status TcpLink::grow_early() {
  Status grown = matcher_.grow(in_early_);
  if (!grown.ok()) return fail(grown);
  in_target_ = in_early_->data.data();
  return Status();
}

Status TcpLink::progress_recvs() {
  while (true) {
    char* dst;
    size_t want;
    // Flow control: a sender that runs calls ahead (a broadcast root) would fill this
    // rank's memory with early frames. Past kEarlyBytesLimit, and while no receive is
    // posted here, the next frame stays in the socket and TCP holds the sender back. A
    // posted receive lifts it (its frame may come after early ones), so nothing waits on it.
    if (throttled()) return Status();
    if (!in_payload_) {
      dst = reinterpret_cast<char*>(&in_header_) + in_header_got_;
      want = sizeof(FrameHeader) - in_header_got_;
    } else {
      if (in_early_ != nullptr && in_got_ == in_early_->data.size()) KOLO_TRY(grow_early());
      dst = in_target_ + in_got_;
      want = (in_early_ != nullptr ? in_early_->data.size() : in_header_.bytes) - in_got_;
    }
    ssize_t n = want == 0 ? 0 : ::recv(fd_.get(), dst, want, MSG_DONTWAIT);
    if (want > 0 && n == 0) {
      if (sends_.empty() && !matcher_.has_posted() && !in_payload_ && in_header_got_ == 0) {
        // A peer that finished and exited: only an error for whoever uses this link later.
        (void)fail(error(Code::kRemote, "rank ", peer_, " closed the connection (it exited)"));
        return Status();
      }
      return fail(error(Code::kRemote, "rank ", peer_, " closed the connection (did it exit or fail?)"));
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status();
      return fail(error(Code::kRemote, "connection to rank ", peer_, " lost: ", std::strerror(errno)));
    }
    if (!in_payload_) {
      in_header_got_ += static_cast<size_t>(n);
      if (in_header_got_ < sizeof(FrameHeader)) continue;
      in_header_got_ = 0;
      KOLO_TRY(start_payload());
    } else {
      in_got_ += static_cast<size_t>(n);
    }
    if (in_payload_ && in_got_ == in_header_.bytes) {
      in_payload_ = false;
      in_target_ = nullptr;
      in_early_ = nullptr;
      if (in_req_ != nullptr) {
        in_req_->done = true;
        in_req_ = nullptr;
      } else {
        Status delivered = matcher_.complete_last();
        if (!delivered.ok()) return fail(delivered);
      }
    }
  }
}

Status TcpLink::fail(Status status) {
  if (failed_.ok()) {
    failed_ = status;
    log_info(Subsys::kTransport, "tcp link ", self_, "->", peer_, " failed: ", status.message());
  }
  for (auto& s : sends_) {
    s.req->done = true;
    s.req->status = failed_;
  }
  sends_.clear();
  matcher_.fail(failed_);
  if (in_req_ != nullptr) {
    in_req_->done = true;
    in_req_->status = failed_;
    in_req_ = nullptr;
  }
  // Shut down, not close: interrupt() may use the descriptor from another thread, so it
  // stays valid (and is not reused) until the link is destroyed.
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
  return failed_;
}

void TcpLink::close() {
  if (failed_.ok()) (void)fail(error(Code::kAborted, "link to rank ", peer_, " was closed"));
}

void TcpLink::interrupt() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace kolo
