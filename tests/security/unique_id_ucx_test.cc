// The unique id (kolo_get_unique_id) carries the store's secret: an id whose secret was
// altered is refused at the store with a clear error, and the real ranks still form the
// communicator. The UCX hello: a peer without the job's secret is refused at connect.
#include <kolo/kolo.h>

#include <chrono>

#include "security_util.h"
#include "transport/transport.h"

namespace kolo::security_test {
namespace {

TEST(UniqueId, AlteredSecretIsRefusedAndTheRealRanksStillJoin) {
  kolo_unique_id id;
  ASSERT_EQ(kolo_get_unique_id(&id), KOLO_SUCCESS) << kolo_last_error();
  kolo_comm_t comm0 = nullptr;
  kolo_result_t result0 = KOLO_ERR_INTERNAL;
  std::thread rank0([&] { result0 = kolo_comm_init_rank(&comm0, 2, &id, 0); });
  // Rank 0 reads the id first: both ranks of this process share one record of the store it
  // hosts, and the forged rank must not race it (engine/world.cc).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // The id's secret: bytes 6 to 37 of kolo_unique_id (UniqueId in engine/world.cc: u32 magic,
  // u16 port, then the 32-byte secret). Flipping them leaves magic and address intact.
  kolo_unique_id forged = id;
  for (int i = 6; i < 38; ++i) forged.internal[i] = static_cast<char>(forged.internal[i] ^ 0x5a);
  kolo_comm_t intruder = nullptr;
  kolo_result_t refused = kolo_comm_init_rank(&intruder, 2, &forged, 1);
  std::string message = kolo_last_error();
  EXPECT_NE(refused, KOLO_SUCCESS) << "a forged id joined";
  EXPECT_NE(message.find("KOLO_SECRET"), std::string::npos) << message;

  kolo_comm_t comm1 = nullptr;
  ASSERT_EQ(kolo_comm_init_rank(&comm1, 2, &id, 1), KOLO_SUCCESS) << kolo_last_error();
  rank0.join();
  ASSERT_EQ(result0, KOLO_SUCCESS);
  float a = 1, b = 2;
  kolo_result_t reduced0 = KOLO_ERR_INTERNAL;
  std::thread sum0([&] { reduced0 = kolo_allreduce(&a, &a, 1, KOLO_FLOAT32, KOLO_SUM, comm0, nullptr); });
  EXPECT_EQ(kolo_allreduce(&b, &b, 1, KOLO_FLOAT32, KOLO_SUM, comm1, nullptr), KOLO_SUCCESS);
  sum0.join();
  EXPECT_EQ(reduced0, KOLO_SUCCESS);
  EXPECT_EQ(a, 3.0f);
  EXPECT_EQ(b, 3.0f);
  kolo_comm_destroy(comm1);
  kolo_comm_destroy(comm0);
}

const TransportRow* ucx_row() {
  for (const TransportRow& row : transport_table()) {
    if (std::string(row.name) == "ucx") return &row;
  }
  return nullptr;
}

// Two ranks connect over UCX with the given secrets; returns both results.
std::pair<Status, Status> ucx_pair(const std::string& secret0, const std::string& secret1) {
  Job job;
  auto store0 = job.client();
  auto store1 = job.client();
  const TransportRow* row = ucx_row();
  auto env_for = [&](StoreClient* store, const std::string& secret, int rank) {
    TransportEnv env;
    env.store = store;
    env.secret = secret;
    env.prefix = "sec-ucx";
    env.rank = rank;
    env.size = 2;
    env.host_of_rank = {0, 0};
    env.allowed = {{"ucx"}, {"ucx"}};
    return env;
  };
  TransportEnv env0 = env_for(store0.get(), secret0, 0);
  TransportEnv env1 = env_for(store1.get(), secret1, 1);
  TransportOutput out0, out1;
  out0.links.resize(2);
  out1.links.resize(2);
  Status status0;
  std::thread rank0([&] { status0 = row->connect(env0, {1}, Deadline(20), &out0); });
  Status status1 = row->connect(env1, {0}, Deadline(20), &out1);
  rank0.join();
  // Left open on purpose: two UCX workers of one process torn down side by side trip an
  // assertion in UCX 1.13 now and then (ucp_worker_destroy: request not released), which
  // the real path never meets (each rank is its own process). The test process ends soon.
  new TransportOutput(std::move(out0));  // NOLINT: leaked on purpose
  new TransportOutput(std::move(out1));  // NOLINT
  return {status0, status1};
}

TEST(UcxHello, PeerWithoutTheSecretIsRefused) {
  if (ucx_row() == nullptr) GTEST_SKIP() << "kolo was built without UCX";
  auto [same0, same1] = ucx_pair(kSecret, kSecret);
  ASSERT_TRUE(same0.ok()) << same0.to_string();
  ASSERT_TRUE(same1.ok()) << same1.to_string();
  auto [bad0, bad1] = ucx_pair(kSecret, "another-secret-0123456789abcdefgh");
  EXPECT_FALSE(bad0.ok()) << "rank 0 took a UCX peer without the secret";
  EXPECT_FALSE(bad1.ok());
  EXPECT_NE(bad0.message().find("does not carry the job's secret"), std::string::npos) << bad0.to_string();
}

}  // namespace
}  // namespace kolo::security_test
