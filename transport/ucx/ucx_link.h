// A Link over a UCP endpoint: kolo's tagged sends and receives as UCX tagged messages
// (ucp_tag_send_nbx / ucp_tag_recv_nbx, host memory type given explicitly), matched by
// UCX. UCX matches tags across the whole worker, so the UCX tag carries the sender's rank
// beside kolo's tag (ucx_tag()); messages of one sender with one tag match in order, which
// is kolo's Link contract. A peer failure (UCP_ERR_HANDLING_MODE_PEER) fails the link with
// UCX's message.
#pragma once

#include <ucp/api/ucp.h>

#include <list>
#include <memory>

#include "transport/link.h"
#include "transport/ucx/ucx_worker.h"

namespace kolo::ucx {

// The UCX tag of kolo tag `tag` from rank `source`: 20 bits of rank, then kolo's
// point-to-point bit, 11 bits of its sequence number and its 32-bit step tag. The sequence
// wraps every 2048 calls; messages of one sender with equal tags still match in order.
uint64_t ucx_tag(int source, uint64_t tag);
constexpr int kMaxRanks = 1 << 20;
// The tag of the connection check (connect()); never a collective's (step 0xffffffff).
constexpr uint64_t kHelloTag = (uint64_t{1} << 63) | (uint64_t{0x7ff} << 32) | 0xffffffffu;

class UcxLink final : public Link {
 public:
  // An endpoint to the worker at `address` (binary, from the peer's UcxWorker::address()),
  // with peer failure detection. UCX connects lazily: the first message proves the path.
  static Result<std::unique_ptr<UcxLink>> connect(int self, int peer, std::shared_ptr<UcxWorker> worker,
                                                 const std::string& address);
  ~UcxLink() override;

  int peer() const override { return peer_; }
  const char* kind() const override { return "ucx"; }
  Status post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) override;
  Status post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) override;
  Status progress() override;
  // None: the communicator sleeps through UcxWake (ucx_transport.cc), which bounds the
  // sleep, since UCX's event descriptor misses some events.
  int poll_fd() const override { return -1; }
  short poll_events() const override;
  bool has_pending() const override { return !ops_.empty(); }
  void close() override { close_link(/*force=*/false); }
  void close_after_failure() override { close_link(/*force=*/true); }
  void interrupt() override { worker_->signal(); }

  // The endpoint's error handler (UCX calls it on the worker's thread during progress).
  void on_peer_error(ucs_status_t status);

 private:
  // A UCX request in flight. Allocated on its own: a callback that comes after the link
  // is gone (link == null) only frees it, and one that comes after close() failed the
  // caller's TransferRequest (req == null) touches nothing of the caller's.
  struct Op {
    UcxLink* link;
    TransferRequest* req;  // null once failed by close()
    size_t expected;       // receives: the size the receive was posted with
    bool is_recv;
    void* ucx_request = nullptr;
    Status result;  // what finish() gave the request
  };
  static void send_done(void* request, ucs_status_t status, void* user_data);
  static void recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data);
  // Completes an op's request with the status (and the size check of a receive).
  void finish(Op* op, ucs_status_t status, size_t length);
  template <class Post>
  Status start(Op* op, Post&& post);
  void forget(Op* op);  // drops a finished op from ops_ and deletes it
  void cancel_receives();
  void close_link(bool force);

  UcxLink(int self, int peer, std::shared_ptr<UcxWorker> worker) : self_(self), peer_(peer), worker_(std::move(worker)) {}
  static void peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  int self_;
  int peer_;
  std::shared_ptr<UcxWorker> worker_;
  ucp_ep_h ep_ = nullptr;
  Status failed_;
  UcxWorker::EndpointOwner* owner_ = nullptr;  // the error handler's way to this link
  bool closed_ = false;
  bool peer_failed_ = false;  // UCX reported the endpoint failed (close may force)
  std::list<Op*> ops_;
  Op* starting_ = nullptr;  // the op being posted (start())
  bool finished_while_starting_ = false;
  Status op_status_;        // what start() returns when the op finished while posting
};

}  // namespace kolo::ucx
