// A Link between two ranks of one host over a pair of byte rings in the domain's segment
// (one per direction). Frames: a 32-byte header, then the payload, streamed as ring space
// allows. Large messages, when the receiver may read our memory (process_vm_readv), send
// only a request-to-send with the buffer's address: the receiver copies once, straight
// into its own buffer, and acknowledges. Receives match frames through the TagMatcher,
// as over TCP; a request-to-send with no receive yet waits there as a rendezvous frame.
#pragma once

#include <deque>
#include <list>
#include <vector>

#include "transport/link.h"
#include "transport/shm/shm_domain.h"
#include "transport/tag_matcher.h"

namespace kolo::shm {

// Messages at least this large use a single copy when the kernel allows it.
constexpr size_t kSingleCopyBytes = 64 << 10;

class ShmLink final : public Link {
 public:
  // `self` and `peer` are communicator ranks; both must be in `domain`.
  ShmLink(Domain& domain, int self, int peer);
  ~ShmLink() override;

  int peer() const override { return peer_; }
  const char* kind() const override { return "shm"; }
  Status post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) override;
  Status post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) override;
  Status progress() override;
  int poll_fd() const override { return -1; }
  short poll_events() const override { return 0; }
  bool has_pending() const override {
    return !sends_.empty() || matcher_.has_posted() || !awaiting_ack_.empty() || !acks_.empty();
  }
  void close() override;
  void interrupt() override { domain_.ring_inbox(domain_.index()); }

 private:
  enum FrameKind : uint32_t { kData = 1, kRequestToSend = 2, kAck = 3 };
  struct FrameHeader {
    uint64_t tag;
    uint64_t bytes;
    uint64_t address;  // kRequestToSend: the sender's buffer
    uint32_t kind;
    uint32_t reserved;
  };
  static_assert(sizeof(FrameHeader) == 32);
  struct PendingSend {
    FrameHeader header;
    const char* data;
    TransferRequest* req;  // for an acknowledgement: the receive it completes
    size_t sent = 0;       // of header + inline payload
  };

  Status progress_sends(bool* moved);
  Status progress_recvs(bool* moved);
  Status on_header();
  // Room for more of the early frame being read (TagMatcher::grow), and the read target.
  Status grow_early();
  Status read_remote(uint64_t address, char* data, size_t bytes);
  // The receive completes only once its acknowledgement is in the ring: a rank whose last
  // step was this receive must not stop progressing (or exit) with the ack unsent, or
  // the sender would wait for it forever.
  void acknowledge(uint64_t tag, TransferRequest* recv);
  Status fail(Status status);
  Result<size_t> readable() const;
  void read_ring(char* out, size_t bytes);
  void write_ring(const char* in, size_t bytes);

  Domain& domain_;
  int self_, peer_;
  int peer_index_;
  ChannelControl& out_;
  char* out_ring_;
  ChannelControl& in_;
  char* in_ring_;
  uint64_t out_head_ = 0;  // our copy of out_.head
  uint64_t in_tail_ = 0;   // our copy of in_.tail
  bool single_copy_;       // the peer can read our memory
  Status failed_;
  std::deque<PendingSend> sends_;
  std::deque<PendingSend> acks_;
  std::list<PendingSend> awaiting_ack_;
  TagMatcher matcher_;
  // The incoming frame being read.
  FrameHeader in_header_{};
  bool in_payload_ = false;
  char* in_target_ = nullptr;
  size_t in_got_ = 0;
  TransferRequest* in_req_ = nullptr;  // null: into the unexpected queue
  EarlyFrame* in_early_ = nullptr;     // the early frame being read; its data grows as it comes
};

}  // namespace kolo::shm
