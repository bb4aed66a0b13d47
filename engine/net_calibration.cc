#include "engine/net_calibration.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "support/log.h"

namespace kolo {
namespace {

constexpr size_t kBytes = size_t{2} << 20;  // 8 ms per round at 2 Gbit/s, 0.2 ms at 100 Gbit/s
constexpr int kRounds = 3;  // the first warms the connections up (TCP's slow start)
// Far above any collective's sequence number (collective tags are seq << 32).
constexpr uint64_t kCalibrationTag = uint64_t{0x7ffffff0} << 32;

Result<double> post_and_wait(Fabric& fabric, int next, int prev, int round, std::vector<char>& out,
                             std::vector<char>& in, TransferRequest& sent, TransferRequest& received,
                             const Deadline& deadline) {
  const auto start = std::chrono::steady_clock::now();
  KOLO_TRY(fabric.connect(prev, deadline));
  KOLO_TRY(fabric.connect(next, deadline));
  KOLO_TRY(fabric.link(prev)->post_recv(kCalibrationTag + round, in.data(), in.size(), &received));
  KOLO_TRY(fabric.link(next)->post_send(kCalibrationTag + round, out.data(), out.size(), &sent));
  while (!(sent.done && received.done)) {
    KOLO_TRY(fabric.progress());
    if (sent.done && !sent.status.ok()) return sent.status;
    if (received.done && !received.status.ok()) return received.status;
    if (deadline.expired()) return error(Code::kTimeout, "measuring the network between hosts timed out (KOLO_TIMEOUT)");
    if (!(sent.done && received.done)) fabric.wait_for_activity(deadline.remaining_ms(10));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Posts and waits for one round: send to `next`, receive from `prev` (one peer when there
// are two hosts). Returns the seconds it took. On failure (a peer died, the network went
// down, the deadline passed) the links are closed before returning: a transfer still
// posted would otherwise complete later into this frame's requests and the caller's buffers.
Result<double> one_round(Fabric& fabric, int next, int prev, int round, std::vector<char>& out,
                         std::vector<char>& in, const Deadline& deadline) {
  TransferRequest sent, received;
  Result<double> seconds = post_and_wait(fabric, next, prev, round, out, in, sent, received, deadline);
  if (!seconds.ok()) fabric.shutdown(/*after_failure=*/true);
  return seconds;
}

}  // namespace

Result<NetCalibration> calibrate_network(Fabric& fabric, StoreClient& store, const std::string& prefix, int rank,
                                         const std::vector<int>& host_of_rank, double efficiency,
                                         ClusterTopology& topology, const Deadline& deadline) {
  NetCalibration cal;
  int hosts = 0;
  for (int h : host_of_rank) hosts = std::max(hosts, h + 1);
  std::vector<int> leader(hosts, -1);
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
    if (leader[host_of_rank[r]] < 0) leader[host_of_rank[r]] = r;
  }
  const int me = host_of_rank[rank];
  if (leader[me] == rank) {
    const int next = leader[(me + 1) % hosts], prev = leader[(me + hosts - 1) % hosts];
    std::vector<char> out(kBytes, 1), in(kBytes);
    double best = 0;
    for (int round = 0; round < kRounds; ++round) {
      auto seconds = one_round(fabric, next, prev, round, out, in, deadline);
      if (!seconds.ok()) return seconds.status().with_context(str_cat("rank ", rank, ": "));
      if (round > 0 && (best == 0 || seconds.value() < best)) best = seconds.value();
    }
    const double gbs = static_cast<double>(kBytes) / best / 1e9;
    KOLO_TRY(store.set(str_cat(prefix, "/netcal/", me), str_cat(gbs), deadline));
  }
  cal.host_gbs.assign(hosts, 0);
  auto values = store.gather(str_cat(prefix, "/netcal/"), hosts, deadline);
  if (!values.ok()) return values.status();
  for (int h = 0; h < hosts; ++h) {
    const std::string& value = values.value()[h];
    cal.host_gbs[h] = std::strtod(value.c_str(), nullptr);
    if (!(cal.host_gbs[h] > 0)) {
      return error(Code::kRemote, "host ", h, " published a network figure of '", value, "'");
    }
  }
  // The topology's hosts are in the order of their first rank, as host_of_rank counts them.
  for (int h = 0; h < hosts && h < static_cast<int>(topology.hosts.size()); ++h) {
    HostTopology& topo = topology.hosts[h];
    for (int nic : topo.of_kind(NodeKind::kNic)) {
      for (int l : topo.links_of(nic)) {
        if (topo.links()[l].kind == LinkKind::kNet) topo.set_link_bandwidth(l, cal.host_gbs[h] / efficiency);
      }
    }
  }
  if (rank == 0) {
    std::string figures;
    for (double g : cal.host_gbs) figures += str_cat(figures.empty() ? "" : ", ", g);
    log_info(Subsys::kInit, "network between hosts measured at ", figures, " GB/s per direction (per host)");
  }
  return cal;
}

}  // namespace kolo
