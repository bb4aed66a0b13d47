// The point-to-point interface every transport implements (tcp, shm, ucx). A Link joins
// this rank to one peer and moves tagged byte ranges:
//   post_send / post_recv hand a buffer over; the request completes later;
//   progress() moves bytes without blocking;
//   close() shuts the link; pending requests then fail.
// A receive matches the earliest send from that peer with the same tag; sizes must agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "support/clock.h"
#include "support/status.h"

namespace kolo {

// A posted send or receive; owned by the caller, filled in by the link.
struct TransferRequest {
  bool done = false;
  Status status;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual int peer() const = 0;
  virtual const char* kind() const = 0;

  // The buffer must stay valid and unchanged (send) / untouched (recv) until req->done.
  virtual Status post_send(uint64_t tag, const void* data, size_t bytes, TransferRequest* req) = 0;
  virtual Status post_recv(uint64_t tag, void* data, size_t bytes, TransferRequest* req) = 0;
  // Moves bytes without blocking. An error means the link is dead: every pending request
  // has failed with it, and later posts fail too.
  virtual Status progress() = 0;
  // For poll(): the descriptor and events to wait on, or -1 when the link has none.
  virtual int poll_fd() const = 0;
  virtual short poll_events() const = 0;
  virtual bool has_pending() const = 0;
  // Fails pending requests with kAborted and closes. Safe to call more than once.
  virtual void close() = 0;
  // The same after a failure (a peer died, a call timed out): nothing left to deliver, so
  // nothing is waited for on the network, which may be what failed.
  virtual void close_after_failure() { close(); }
  // Wakes a blocked poll from another thread (kolo_comm_abort); must be async-safe.
  virtual void interrupt() = 0;
};

// Links a backend makes when a call first needs them, not when the communicator is made
// (tcp, KOLO_LAZY_CONNECT=1): a job of N ranks then holds the links its plans use (ring and
// tree neighbours), not N-1. Whichever end needs a link first connects; the other end
// answers from a thread of its own, so neither waits on the other's calls.
class LinkMaker {
 public:
  virtual ~LinkMaker() = default;
  // The link to `peer` (one this maker was given), made now or taken from the peer's own
  // connection if that came first.
  virtual Result<std::unique_ptr<Link>> make(int peer, const Deadline& deadline) = 0;
  // Stops answering peers (idempotent); links made stay.
  virtual void stop() = 0;
};

}  // namespace kolo
