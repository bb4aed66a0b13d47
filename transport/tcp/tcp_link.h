// A Link over one TCP connection. Frames are a 16-byte header (tag, length) and the
// payload. Receives match frames through the TagMatcher (its unexpected queue keeps frames
// that arrive before their receive).
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "transport/link.h"
#include "transport/socket.h"
#include "transport/tag_matcher.h"

namespace kolo {

class TcpLink final : public Link {
 public:
  TcpLink(int self, int peer, Fd fd);
  ~TcpLink() override;

  int peer() const override { return peer_; }
  const char* kind() const override { return "tcp"; }
  Status post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) override;
  Status post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) override;
  Status progress() override;
  int poll_fd() const override { return failed_.ok() ? fd_.get() : -1; }
  short poll_events() const override;
  bool has_pending() const override { return !sends_.empty() || matcher_.has_posted(); }
  void close() override;
  void interrupt() override;

 private:
  struct FrameHeader {
    uint64_t tag;
    uint64_t bytes;
  };
  struct PendingSend {
    FrameHeader header;
    const char* data;
    size_t sent = 0;  // of header + payload
    TransferRequest* req;
  };

  Status progress_sends();
  Status progress_recvs();
  // The frame being read: its header, then its payload into `target`.
  Status start_payload();
  // Room for more of the early frame being read (TagMatcher::grow), and the read target.
  Status grow_early();
  Status fail(Status status);
  // Whether reading waits (flow control: too many early bytes and no receive posted).
  bool throttled() const;

  int self_;
  int peer_;
  Fd fd_;
  Status failed_;  // set once the link is dead
  std::deque<PendingSend> sends_;
  TagMatcher matcher_;

  FrameHeader in_header_{};
  size_t in_header_got_ = 0;
  bool in_payload_ = false;
  char* in_target_ = nullptr;
  size_t in_got_ = 0;
  TransferRequest* in_req_ = nullptr;  // null when reading into the unexpected queue
  EarlyFrame* in_early_ = nullptr;     // the early frame being read, whose data grows as it comes
};

}  // namespace kolo
