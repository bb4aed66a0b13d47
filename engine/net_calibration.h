// The network between hosts, measured when a communicator spanning several hosts is
// made, so that the cost model plans with what the links deliver (a shaped, shared or
// slower-than-its-port network), not with the NICs' nominal speeds. Each host's first rank
// exchanges a few MB with the first ranks of the neighbouring hosts, both directions at
// once (as ring and two-level schedules load the links); the best of the timed rounds
// gives the host's figure, which goes through the store so that every rank plans with the
// same numbers, and replaces the net link figure of that host's NICs in the topology.
// KOLO_NET_CALIBRATE=0 keeps the nominal figures.
#pragma once

#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "topology/graph.h"
#include "transport/bootstrap/store.h"
#include "transport/fabric.h"

namespace kolo {

struct NetCalibration {
  std::vector<double> host_gbs;  // per host: GB/s per direction to its neighbours
};

// Collective over the communicator's ranks (only the hosts' first ranks send). `efficiency`:
// the cost model's factor on NIC figures, divided out so that the model predicts the
// measured rate.
Result<NetCalibration> calibrate_network(Fabric& fabric, StoreClient& store, const std::string& prefix, int rank,
                                         const std::vector<int>& host_of_rank, double efficiency,
                                         ClusterTopology& topology, const Deadline& deadline);

}  // namespace kolo
