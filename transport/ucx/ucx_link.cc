#include "transport/ucx/ucx_link.h"

#include <poll.h>

#include <vector>

#include "support/clock.h"
#include "support/log.h"

namespace kolo::ucx {

uint64_t ucx_tag(int source, uint64_t tag) {
  return (uint64_t(static_cast<uint32_t>(source) & (kMaxRanks - 1)) << 44) | ((tag >> 63) << 43) |
         (((tag >> 32) & 0x7ff) << 32) | (tag & 0xffffffffu);
}

Result<std::unique_ptr<UcxLink>> UcxLink::connect(int self, int peer, std::shared_ptr<UcxWorker> worker,
                                                  const std::string& address) {
  std::unique_ptr<UcxLink> link(new UcxLink(self, peer, std::move(worker)));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  // Peer failures reach peer_error(): a dead peer fails the link at once. (With several
  // rails per peer UCX 1.13 failed healthy endpoints this way; ucx_worker.cc keeps one.)
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = peer_error;
  link->owner_ = link->worker_->add_endpoint_owner(link.get());
  params.err_handler.arg = link->owner_;
  ucs_status_t st = ucp_ep_create(link->worker_->get(), &params, &link->ep_);
  if (st != UCS_OK) return ucx_error(st, str_cat("ucx transport: rank ", self, " making an endpoint to rank ", peer));
  return link;
}

void UcxLink::peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  UcxLink* link = static_cast<UcxWorker::EndpointOwner*>(arg)->link;
  if (link != nullptr) link->on_peer_error(status);
}

UcxLink::~UcxLink() {
  close();
  if (owner_ != nullptr) owner_->link = nullptr;
  // UCX still holds these requests (a send it could not cancel in time): their callbacks
  // will only free them.
  for (Op* op : ops_) op->link = nullptr;
}

short UcxLink::poll_events() const { return POLLIN; }

void UcxLink::send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  ucp_request_free(request);
  if (op->link == nullptr) {
    delete op;
    return;
  }
  op->link->finish(op, status, op->expected);
  op->link->forget(op);
}

void UcxLink::recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  ucp_request_free(request);
  if (op->link == nullptr) {
    delete op;
    return;
  }
  op->link->finish(op, status, status == UCS_OK && info != nullptr ? info->length : op->expected);
  op->link->forget(op);
}

void UcxLink::finish(Op* op, ucs_status_t status, size_t length) {
  if (op->req == nullptr) return;
  TransferRequest* req = op->req;
  op->req = nullptr;
  if (status == UCS_OK && op->is_recv && length != op->expected) {
    req->status = error(Code::kMismatch, "rank ", self_, ": rank ", peer_, " sent ", length,
                        " bytes where rank ", self_, " expected ", op->expected,
                        " (the ranks made different calls)");
    if (failed_.ok()) failed_ = req->status;
  } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    req->status = error(Code::kMismatch, "rank ", self_, ": rank ", peer_, " sent more than the ",
                        op->expected, " bytes rank ", self_, " expected (the ranks made different calls)");
    if (failed_.ok()) failed_ = req->status;
  } else if (status != UCS_OK) {
    req->status = !failed_.ok() ? failed_
                                : ucx_error(status, str_cat("rank ", self_, ": ", op->is_recv ? "receive from" : "send to",
                                                            " rank ", peer_));
  } else {
    req->status = Status();
  }
  op->result = req->status;
  req->done = true;
}

void UcxLink::forget(Op* op) {
  if (op == starting_) {
    finished_while_starting_ = true;
    op_status_ = op->result;
  }
  ops_.remove(op);
  delete op;
}

// UCX may run the callback inside the call that posts (a receive whose message is
// already here): the op is listed first, and `starting_` tells whether it is gone.
template <class Post>
Status UcxLink::start(Op* op, Post&& post) {
  ops_.push_back(op);
  starting_ = op;
  finished_while_starting_ = false;
  ucs_status_ptr_t result = post();
  starting_ = nullptr;
  if (finished_while_starting_) return op_status_;
  if (result == nullptr) {  // a send done at once; UCX calls no callback
    finish(op, UCS_OK, op->expected);
    forget(op);
    return Status();
  }
  if (UCS_PTR_IS_ERR(result)) {
    const ucs_status_t st = UCS_PTR_STATUS(result);
    if (failed_.ok()) failed_ = ucx_error(st, str_cat("rank ", self_, ": posting a transfer with rank ", peer_));
    finish(op, st, 0);
    forget(op);
    return failed_;
  }
  op->ucx_request = result;
  return Status();
}

Status UcxLink::post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) {
  req->done = false;
  req->status = Status();
  if (!failed_.ok()) return failed_;
  auto* op = new Op{this, req, bytes, false, nullptr, Status()};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.cb.send = send_done;
  param.user_data = op;
  param.datatype = ucp_dt_make_contig(1);
  param.memory_type = UCS_MEMORY_TYPE_HOST;  // device buffers reach links through the device path's staging
  return start(op, [&] { return ucp_tag_send_nbx(ep_, data, bytes, ucx_tag(self_, tag), &param); });
}

Status UcxLink::post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) {
  req->done = false;
  req->status = Status();
  if (!failed_.ok()) {
    // A message that arrived before the peer went away (it finished and closed its
    // endpoint) is still delivered, as over TCP; receives are matched on the worker.
    ucp_tag_recv_info_t info{};
    const bool arrived = peer_failed_ && !closed_ &&
                         ucp_tag_probe_nb(worker_->get(), ucx_tag(peer_, tag), ~uint64_t{0}, 0, &info) != nullptr;
    if (!arrived) return failed_;
  }
  auto* op = new Op{this, req, bytes, true, nullptr, Status()};
  ucp_request_param_t param{};
  // Always through the callback: UCX 1.13 leaves recv_info's length 0 on an immediate
  // completion, and the length is how a size mismatch shows.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = recv_done;
  param.user_data = op;
  param.datatype = ucp_dt_make_contig(1);
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  return start(op, [&] { return ucp_tag_recv_nbx(worker_->get(), data, bytes, ucx_tag(peer_, tag), ~uint64_t{0}, &param); });
}

Status UcxLink::progress() {
  worker_->progress();
  // A peer that finished and closed its endpoint is only an error for whoever uses this
  // link later (as over TCP): while nothing is pending here, progress does not fail.
  if (peer_failed_ && ops_.empty()) return Status();
  return failed_;
}

// Receives are posted on the worker, not the endpoint: a dead peer does not end them, so
// the link cancels them (their callbacks then fail them with the link's error).
void UcxLink::cancel_receives() {
  std::vector<void*> receives;
  for (Op* op : ops_) {
    if (op->is_recv && op->ucx_request != nullptr) receives.push_back(op->ucx_request);
  }
  for (void* request : receives) ucp_request_cancel(worker_->get(), request);
}

void UcxLink::on_peer_error(ucs_status_t status) {
  peer_failed_ = true;
  if (failed_.ok()) {
    failed_ = ucx_error(status, str_cat("rank ", self_, ": the link to rank ", peer_, " failed (the peer died or "
                                        "the network between them failed)"));
  }
  cancel_receives();
}

void UcxLink::close_link(bool force_close) {
  if (closed_) return;
  closed_ = true;
  if (failed_.ok()) failed_ = error(Code::kAborted, "rank ", self_, ": the link to rank ", peer_, " was closed");
  // Pending requests fail through their callbacks (cancelled receives; sends when the
  // endpoint closes), so that "done" means UCX has let go of the buffer.
  cancel_receives();
  if (ep_ != nullptr) {
    // A working link flushes what it sent; after a failure, or with transfers still
    // pending (a timeout: the network may be cut, and a flush would wait on it), it is
    // closed at once (forcing is allowed: every endpoint runs in UCP_ERR_HANDLING_MODE_PEER).
    ucp_request_param_t param{};
    const bool force = force_close || peer_failed_ || !ops_.empty();
    if (force) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    ucs_status_ptr_t closing = ucp_ep_close_nbx(ep_, &param);
    ep_ = nullptr;
    // A forced close fails the pending transfers at once, but over a cut network UCX's TCP
    // transport may hold the close itself for seconds: the error is not kept waiting for it.
    // A flush on a working network takes an RTT or so; past 0.5 s the network is likely
    // what failed, and kolo_comm_destroy should not hang on it.
    Deadline deadline(force ? 0.2 : 0.5);
    while (closing != nullptr && !UCS_PTR_IS_ERR(closing) && !deadline.expired()) {
      ucp_worker_progress(worker_->get());
      if (ucp_request_check_status(closing) != UCS_INPROGRESS) {
        ucp_request_free(closing);
        closing = nullptr;
      }
    }
    // Past the deadline the close goes on inside UCX; released here, UCX frees it when it
    // ends (a request still held when the worker is destroyed aborts the process).
    if (closing != nullptr && !UCS_PTR_IS_ERR(closing)) ucp_request_free(closing);
  }
  Deadline deadline(1.0);
  while (!ops_.empty() && !deadline.expired()) ucp_worker_progress(worker_->get());
  if (ops_.empty()) return;
  // Still held by UCX: the caller's requests end here, but their buffers may yet be
  // touched; a callback that comes later only frees its op.
  log_warn(Subsys::kTransport, "rank ", self_, ": ", ops_.size(), " UCX requests to rank ", peer_,
           " still pending after closing the link; their buffers may still be in use");
  for (Op* op : ops_) {
    if (op->req == nullptr) continue;
    op->req->status = failed_;
    op->req->done = true;
    op->req = nullptr;
  }
}

}  // namespace kolo::ucx
