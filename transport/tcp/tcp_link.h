// A Link over one TCP connection. Frames are a 16-byte header (tag, length) and the
// payload. Received frames with no matching receive yet are kept (unexpected queue), so
// two ranks sending to each other at once never deadlock.
#pragma once

#include <deque>
#include <list>
#include <string>
#include <vector>

#include "transport/link.h"
#include "transport/socket.h"

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
  bool has_pending() const override { return !sends_.empty() || !recvs_.empty(); }
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
  struct PendingRecv {
    uint64_t tag;
    char* data;
    size_t bytes;
    TransferRequest* req;
  };
  struct Unexpected {
    uint64_t tag;
    std::vector<char> data;
    bool complete = false;  // only the last entry can still be arriving
  };

  Status progress_sends();
  Status progress_recvs();
  // The frame being read: its header, then its payload into `target`.
  Status start_payload();
  Status fail(Status status);
  // A frame that arrived before its receive was posted: hand it to a receive posted since.
  Status deliver_unexpected();
  Status size_mismatch(uint64_t tag, size_t sent, size_t expected);

  int self_;
  int peer_;
  Fd fd_;
  Status failed_;  // set once the link is dead
  std::deque<PendingSend> sends_;
  std::list<PendingRecv> recvs_;
  std::list<Unexpected> unexpected_;

  FrameHeader in_header_{};
  size_t in_header_got_ = 0;
  bool in_payload_ = false;
  char* in_target_ = nullptr;
  size_t in_got_ = 0;
  TransferRequest* in_req_ = nullptr;  // null when reading into the unexpected queue
};

}  // namespace kolo
