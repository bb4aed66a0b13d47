// Runs what negotiation agreed: fused allreduces (small tensors packed into the fusion
// buffer, all of a group's tensors run as one collective group), and the other
// named operations one by one, on the runtime's own communicator. Copies into and out of
// the fusion buffer go through the kernels' scale_copy, so prescale, postscale and AVG's
// division happen during the copies instead of in extra passes over the data. Device
// tensors go the same way on the runtime's own stream (lane.h); their requests complete
// once that stream has finished.
#pragma once

#include <string>
#include <vector>

#include "engine/communicator.h"
#include "engine/runtime/lane.h"
#include "engine/runtime/message.h"
#include "engine/runtime/timeline.h"

namespace kolo::runtime {

class OpRunner {
 public:
  // Tensors of at least this size are reduced in place within their group's collective
  // instead of through the fusion buffer (see allreduce()). On one host an allreduce costs
  // about a copy, so packing pays only where the per-call start-up (~1 us) dominates:
  // ResNet-50's step measured 1.14-1.17x one allreduce with 64 KB, 1.30-1.43x with 1 MB.
  static constexpr size_t kInPlaceBytes = size_t{64} << 10;

  OpRunner(Communicator& comm, double timeout_seconds);

  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // members: the allreduce requests of one fusion group (from plan_fusion), in order.
  Status allreduce(const std::vector<Request*>& members, double negotiated_at);
  Status run(const Response& resp, Request& request, double negotiated_at);
  size_t fusion_buffer_bytes() const { return fusion_bytes_; }
  // Not ok once a collective failed: the communicator is dead and the runtime must stop.
  const Status& comm_error() const { return comm_error_; }

 private:
  // Switches the lane to the request's memory and makes its stream wait for the request's
  // producer (device tensors).
  Status prepare(const Request& request);
  // A failure of this rank's own work after negotiation: recorded as comm_error(), so the
  // runtime stops instead of running on out of step with its peers.
  Status fatal(Status status);
  // On the lane: the calls run on its stream (device) or now (host).
  Status collective(const CollCall& call);
  Status collective_group(std::vector<CollCall> calls);
  // op=Adasum (engine/adasum.h), which runs on host memory: the group's tensors are packed
  // into a host buffer (device tensors copied off the runtime's stream, which is waited
  // for), reduced there with coefficients of their own, and copied back.
  Status adasum(const std::vector<Request*>& members, double negotiated_at);
  Status allgather(const Response& resp, Request& request, CollSpec* spec);
  Status alltoall(const Response& resp, Request& request);
  // The output buffer from the request's allocator; a scratch buffer (and an error for
  // this rank only) when it fails, because the collective must still run on every rank.
  void* output(Request& request, size_t count, const std::vector<size_t>& rank_counts, Status* failure);
  void record(const Request& request, const char* phase, double start, double end, const std::string& args = "");
  // The timeline's args of the collective that just ran: its Plan ("algorithm") and its
  // number in the communicator's flight recorder ("seq").
  std::string plan_args(const CollSpec& spec) const;

  Communicator& comm_;
  Timeline* timeline_ = nullptr;
  double timeout_seconds_;
  Lane lane_;  // host or device memory of the current group; holds the fusion buffer
  size_t fusion_bytes_ = 0;
  std::vector<char> adasum_buffer_;  // host memory for Adasum (grows)
  Status comm_error_;
};

}  // namespace kolo::runtime
