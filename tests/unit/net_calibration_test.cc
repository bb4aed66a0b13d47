// The network measurement of a communicator spanning hosts (engine/net_calibration.h),
// when it fails: the peer host never answers (its link was cut, or it stopped). The
// measurement must return a timeout in time and leave nothing posted on its links: a
// receive left posted would later be completed into the measurement's stack frame and
// buffers, which are gone (found by the fault matrix's link cut during kolo_comm_split).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>

#include "engine/net_calibration.h"
#include "transport/bootstrap/store.h"
#include "transport/fabric.h"
#include "transport/socket.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo {
namespace {

TEST(NetCalibration, APeerThatNeverAnswersTimesOutAndLeavesNothingPosted) {
  const std::string secret(32, 'n');
  auto server = StoreServer::start("127.0.0.1", 0, secret);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const HostPort at{"127.0.0.1", server.value()->port()};
  auto client0 = StoreClient::connect(at, secret, Deadline(10));
  auto client1 = StoreClient::connect(at, secret, Deadline(10));
  ASSERT_TRUE(client0.ok() && client1.ok());
  std::optional<Result<std::vector<std::unique_ptr<Link>>>> links1;
  std::thread rank1([&] {
    links1 = connect_tcp_mesh(*client1.value(), MeshOptions{"netcal", 1, 2, secret, "127.0.0.1", {}}, Deadline(10));
  });
  auto links0 = connect_tcp_mesh(*client0.value(), MeshOptions{"netcal", 0, 2, secret, "127.0.0.1", {}}, Deadline(10));
  rank1.join();
  ASSERT_TRUE(links0.ok()) << links0.status().message();
  ASSERT_TRUE(links1->ok()) << links1->status().message();

  // Two hosts of one rank each; rank 1 is connected but never measures (never answers).
  Fabric fabric(0, 2, links0.take());
  ClusterTopology topology;
  const double started = now_seconds();
  auto measured = calibrate_network(fabric, *client0.value(), "netcal", 0, {0, 1}, 1.0, topology, Deadline(0.3));
  const double took = now_seconds() - started;
  ASSERT_FALSE(measured.ok());
  EXPECT_EQ(measured.status().code(), Code::kTimeout) << measured.status().message();
  EXPECT_LT(took, 5.0);
  // Closed with the failure: the receive the measurement posted is no longer held.
  EXPECT_FALSE(fabric.link(1)->has_pending());
  TransferRequest late;
  char byte = 0;
  EXPECT_FALSE(fabric.link(1)->post_recv(1, &byte, 1, &late).ok() && !late.done)
      << "the link still takes receives after the failed measurement";
}

}  // namespace
}  // namespace kolo
