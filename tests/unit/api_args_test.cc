// Argument checks of the C API: each bad argument gives the documented code, and
// kolo_last_error() names the argument and its value. Uses a one-rank world (no launcher
// variables), so it runs in-process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "kolo/kolo.h"
#include "one_rank_comm.h"

namespace {

class ApiArgs : public OneRankComm {
 protected:
  // The result is `code` and the last error mentions every fragment.
  static void expect_error(kolo_result_t got, kolo_result_t code, std::initializer_list<const char*> fragments) {
    EXPECT_EQ(got, code) << kolo_last_error();
    for (const char* f : fragments) EXPECT_NE(std::strstr(kolo_last_error(), f), nullptr) << kolo_last_error();
  }
  float a_[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float b_[8] = {};
};

TEST_F(ApiArgs, OneRankWorld) {
  EXPECT_EQ(kolo_comm_size(comm_), 1);
  EXPECT_EQ(kolo_comm_rank(comm_), 0);
  EXPECT_EQ(kolo_comm_local_size(comm_), 1);
  EXPECT_EQ(kolo_comm_cross_size(comm_), 1);
  ASSERT_EQ(kolo_allreduce(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, comm_, nullptr), KOLO_SUCCESS);
  EXPECT_EQ(b_[7], 8.0f);
  EXPECT_EQ(kolo_version(), KOLO_VERSION_CODE);
}

TEST_F(ApiArgs, NullBuffersWithCount) {
  expect_error(kolo_allreduce(nullptr, b_, 8, KOLO_FLOAT32, KOLO_SUM, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"kolo_allreduce", "send is NULL", "count 8"});
  expect_error(kolo_allgather(a_, nullptr, 3, KOLO_FLOAT32, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"recv is NULL", "3"});
  expect_error(kolo_recv(nullptr, 2, KOLO_FLOAT32, 0, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT, {"peer = 0"});
}

TEST_F(ApiArgs, ZeroCountIsValidWithNullBuffers) {
  EXPECT_EQ(kolo_allreduce(nullptr, nullptr, 0, KOLO_FLOAT32, KOLO_SUM, comm_, nullptr), KOLO_SUCCESS);
  EXPECT_EQ(kolo_broadcast(nullptr, nullptr, 0, KOLO_INT8, 0, comm_, nullptr), KOLO_SUCCESS);
  EXPECT_EQ(kolo_alltoall(nullptr, nullptr, 0, KOLO_FLOAT64, comm_, nullptr), KOLO_SUCCESS);
}

TEST_F(ApiArgs, DtypeAndOpOutOfRange) {
  expect_error(kolo_allreduce(a_, b_, 8, static_cast<kolo_dtype_t>(12), KOLO_SUM, comm_, nullptr),
               KOLO_ERR_INVALID_ARGUMENT, {"dtype = 12"});
  expect_error(kolo_allreduce(a_, b_, 8, static_cast<kolo_dtype_t>(-1), KOLO_SUM, comm_, nullptr),
               KOLO_ERR_INVALID_ARGUMENT, {"dtype = -1"});
  expect_error(kolo_reduce(a_, b_, 8, KOLO_FLOAT32, static_cast<kolo_op_t>(6), 0, comm_, nullptr),
               KOLO_ERR_INVALID_ARGUMENT, {"op = 6"});
  expect_error(kolo_reduce(a_, b_, 8, KOLO_FLOAT32, KOLO_ADASUM, 0, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"KOLO_ADASUM", "allreduce only"});
}

TEST_F(ApiArgs, RootAndPeerOutOfRange) {
  expect_error(kolo_broadcast(a_, b_, 8, KOLO_FLOAT32, 1, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"root = 1", "1 ranks"});
  expect_error(kolo_reduce(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, -3, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"root = -3"});
  expect_error(kolo_send(a_, 8, KOLO_FLOAT32, 4, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT, {"peer = 4"});
}

TEST_F(ApiArgs, BadCommunicators) {
  expect_error(kolo_allreduce(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, nullptr, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"comm is NULL"});
  auto* garbage = reinterpret_cast<kolo_comm_t>(a_);
  expect_error(kolo_barrier(garbage), KOLO_ERR_INVALID_USAGE, {"not an initialised communicator"});
  kolo_comm_t gone = comm_;
  ASSERT_EQ(kolo_comm_destroy(comm_), KOLO_SUCCESS);
  comm_ = nullptr;
  expect_error(kolo_allreduce(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, gone, nullptr), KOLO_ERR_INVALID_USAGE,
               {"already destroyed"});
  expect_error(kolo_comm_destroy(gone), KOLO_ERR_INVALID_USAGE, {"kolo_comm_destroy"});
  EXPECT_EQ(kolo_comm_rank(gone), -1);
}

TEST_F(ApiArgs, PartialOverlapRefused) {
  expect_error(kolo_allreduce(a_, a_ + 1, 4, KOLO_FLOAT32, KOLO_SUM, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"overlap"});
  // Where the in-place form is an offset, not equality, any other overlap is refused
  // (a peer reading the input in place would see it overwritten), naming the form.
  expect_error(kolo_allgather(a_ + 1, a_, 4, KOLO_FLOAT32, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"overlap", "send == recv + rank * sendcount"});
  expect_error(kolo_reduce_scatter(a_, a_ + 2, 4, KOLO_FLOAT32, KOLO_SUM, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"overlap", "recv == send + rank * recvcount"});
  const size_t counts[1] = {4}, displs[1] = {2};
  expect_error(kolo_allgatherv(a_, 4, a_, counts, displs, KOLO_FLOAT32, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"overlap", "send == recv + displs[rank]"});
  EXPECT_EQ(kolo_allgatherv(a_ + 2, 4, a_, counts, displs, KOLO_FLOAT32, comm_, nullptr), KOLO_SUCCESS);  // in place
}

TEST_F(ApiArgs, OptionsChecked) {
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.wire_dtype = KOLO_FLOAT16;
  // One rank has no wire: a compressed allreduce is a copy (several ranks on host buffers
  // are refused: tests/multiproc/worker.cc).
  EXPECT_EQ(kolo_allreduce_ex(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, &options, comm_, nullptr), KOLO_SUCCESS);
  expect_error(kolo_allreduce_ex(a_, b_, 8, KOLO_INT32, KOLO_SUM, &options, comm_, nullptr), KOLO_ERR_UNSUPPORTED,
               {"compresses FLOAT32 data", "int32"});
  expect_error(kolo_allreduce_ex(a_, b_, 8, KOLO_FLOAT32, KOLO_MAX, &options, comm_, nullptr), KOLO_ERR_UNSUPPORTED,
               {"compresses sums", "max"});
  options.wire_dtype = KOLO_INT8;
  expect_error(kolo_allreduce_ex(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, &options, comm_, nullptr),
               KOLO_ERR_INVALID_ARGUMENT, {"wire_dtype = 0"});
  options = KOLO_COLL_OPTIONS_INIT;
  options.algorithm = 9;
  expect_error(kolo_allreduce_ex(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, &options, comm_, nullptr),
               KOLO_ERR_INVALID_ARGUMENT, {"algorithm = 9"});
  options = KOLO_COLL_OPTIONS_INIT;
  options.prescale = 2.0;
  options.postscale = 0.25;
  ASSERT_EQ(kolo_allreduce_ex(a_, b_, 8, KOLO_FLOAT32, KOLO_SUM, &options, comm_, nullptr), KOLO_SUCCESS);
  EXPECT_EQ(b_[3], 2.0f);  // 4 * 2 * 0.25
}

TEST_F(ApiArgs, AllgathervCountsChecked) {
  size_t counts[1] = {5};
  size_t displs[1] = {0};
  expect_error(kolo_allgatherv(a_, 4, b_, counts, displs, KOLO_FLOAT32, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"recvcounts[0] = 5", "sendcount = 4"});
  expect_error(kolo_allgatherv(a_, 4, b_, nullptr, displs, KOLO_FLOAT32, comm_, nullptr), KOLO_ERR_INVALID_ARGUMENT,
               {"recvcounts is NULL"});
}

TEST_F(ApiArgs, GroupEndWithoutStart) {
  expect_error(kolo_group_end(), KOLO_ERR_INVALID_USAGE, {"without kolo_group_start"});
}

TEST_F(ApiArgs, ResultStrings) {
  EXPECT_STREQ(kolo_result_string(KOLO_SUCCESS), "success");
  EXPECT_STREQ(kolo_result_string(KOLO_ERR_TIMEOUT), "timeout");
  EXPECT_STREQ(kolo_result_string(static_cast<kolo_result_t>(99)), "unknown result code");
}

TEST(ApiInit, MissingSecretIsRefusedWithAdvice) {
  setenv("KOLO_RANK", "0", 1);
  setenv("KOLO_SIZE", "2", 1);
  setenv("KOLO_ADDR", "127.0.0.1:1", 1);
  unsetenv("KOLO_SECRET");
  unsetenv("KOLO_INSECURE");
  kolo_comm_t comm = nullptr;
  EXPECT_EQ(kolo_init(&comm), KOLO_ERR_INVALID_USAGE);
  EXPECT_NE(std::strstr(kolo_last_error(), "KOLO_SECRET is not set"), nullptr) << kolo_last_error();
  setenv("KOLO_RANK", "2", 1);
  EXPECT_EQ(kolo_init(&comm), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(kolo_last_error(), "rank 2"), nullptr) << kolo_last_error();
  for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR"}) unsetenv(v);
}

// A port for rank 0's store below Linux's ephemeral range (32768 up, where other tests'
// connections take their local ports) and free now (bound and released once to check):
// a port drawn from 30000-49999 was sometimes taken under a parallel ctest.
int free_port_below_ephemeral() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int port = 20000 + static_cast<int>((getpid() * 7919 + attempt * 104729) % 12000);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<uint16_t>(port));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)) == 0;
    if (fd >= 0) ::close(fd);
    if (free) return port;
  }
  return 20000 + getpid() % 12000;
}

TEST(ApiInit, MissingRankTimesOutWithTheRankNamed) {
  setenv("KOLO_RANK", "0", 1);
  setenv("KOLO_SIZE", "2", 1);
  const std::string addr = "127.0.0.1:" + std::to_string(free_port_below_ephemeral());
  setenv("KOLO_ADDR", addr.c_str(), 1);  // rank 0 hosts the store there
  setenv("KOLO_INSECURE", "1", 1);
  setenv("KOLO_TIMEOUT", "1", 1);
  kolo_comm_t comm = nullptr;
  auto start = std::chrono::steady_clock::now();
  kolo_result_t rc = kolo_init(&comm);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "KOLO_INSECURE", "KOLO_TIMEOUT"}) unsetenv(v);
  EXPECT_NE(rc, KOLO_SUCCESS);
  EXPECT_NE(std::strstr(kolo_last_error(), "rank 1"), nullptr) << kolo_last_error();
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
