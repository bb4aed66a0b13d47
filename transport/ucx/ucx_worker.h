// One UCP context and worker per communicator (shared by its UCX links): tagged messages,
// wake-up through the worker's event descriptor. UCX picks the wire itself (InfiniBand or
// RoCE through libibverbs where the hardware is, TCP and shared memory otherwise; UCX_TLS
// narrows it). Errors carry UCX's own words.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace kolo::ucx {

class UcxLink;

// A kolo error from a UCX status: "<what>: <UCX's message>".
Status ucx_error(ucs_status_t status, const std::string& what);

class UcxWorker {
 public:
  static Result<std::unique_ptr<UcxWorker>> create();
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }
  // This worker's address, for the peers (binary).
  const std::string& address() const { return address_; }
  int event_fd() const { return efd_; }
  // Progresses until UCX has nothing left to do now, then arms the event descriptor, so
  // that a poll() on it after this returns wakes on the next event. True when UCX did
  // something.
  bool progress();
  // From any thread: wakes a poll() on the event descriptor (kolo_comm_abort).
  void signal();

  // What an endpoint's error handler reaches: its link, or null once the link is gone.
  // Owned by the worker, not the link: UCX may still call the handler of an endpoint whose
  // close it has not finished (forced, on a cut network) after the link was destroyed.
  struct EndpointOwner {
    UcxLink* link = nullptr;
  };
  EndpointOwner* add_endpoint_owner(UcxLink* link);

 private:
  UcxWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  int efd_ = -1;
  std::vector<std::unique_ptr<EndpointOwner>> owners_;  // freed after ucp_worker_destroy
};

}  // namespace kolo::ucx
