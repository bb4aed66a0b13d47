// Device memory every rank of a host maps (transport/ipc/ipc_regions.h), on the
// emulated device between real processes: each rank sees every peer's writes in its
// mapping of the peer's region; a size that differs between ranks, and a peer that never
// comes, are errors that name the rank.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/bootstrap/store.h"
#include "transport/ipc/ipc_regions.h"

namespace kolo {
namespace {

constexpr size_t kBytes = 1 << 16;

// One rank, in a child process: map, write a pattern into the own region, check every
// peer's pattern through the mappings. Returns the exit code (0: all seen).
int rank_main(uint16_t port, int index, int size, size_t bytes, const char* prefix, double seconds) {
  Result<std::unique_ptr<StoreClient>> client = StoreClient::connect(HostPort{"127.0.0.1", port}, "", Deadline(10));
  if (!client.ok()) return 10;
  IpcSite site{client.value().get(), prefix, index, size};
  Result<std::unique_ptr<IpcRegions>> regions = IpcRegions::create(site, bytes, Deadline(seconds), device::emulated_ops());
  if (!regions.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", index, regions.status().message().c_str());
    const std::string m = regions.status().message();
    if (regions.status().code() == Code::kMismatch && m.find("local rank") != std::string::npos) return 20;
    if (regions.status().code() == Code::kTimeout && m.find("waiting for local rank 1") != std::string::npos) return 21;
    if (regions.status().code() == Code::kUnsupported && m.find("local rank") != std::string::npos) return 22;
    return 11;
  }
  IpcRegions& r = *regions.value();
  for (int p = 0; p < size; ++p) {
    if (r.region(p) == nullptr) return 12;
    for (size_t i = 0; i < bytes; i += 4096) {
      if (r.region(p)[i] != 0) return 13;  // zeroed at creation
    }
  }
  if (!client.value()->barrier(std::string(prefix) + "/checked", size, Deadline(10)).ok()) return 17;
  std::memset(r.region(index), 'a' + index, bytes);  // emulated device memory is host-addressable
  if (!client.value()->barrier(std::string(prefix) + "/written", size, Deadline(10)).ok()) return 14;
  for (int p = 0; p < size; ++p) {
    if (r.region(p)[0] != 'a' + p || r.region(p)[bytes - 1] != 'a' + p) return 15;
  }
  if (!client.value()->barrier(std::string(prefix) + "/read", size, Deadline(10)).ok()) return 16;
  return 0;
}

// Runs `size` ranks as processes (rank i with bytes_of(i)); the exit codes. The ranks are
// forked before the store server starts its thread and learn its port through a pipe: a
// child forked while another thread holds a lock of the allocator (ASan's, for one) would
// wait for it forever.
std::vector<int> run_ranks(int size, int started, size_t (*bytes_of)(int), const char* prefix, double seconds) {
  std::vector<pid_t> children;
  std::vector<int> port_pipes;
  for (int i = 0; i < started; ++i) {
    int fds[2];
    if (pipe(fds) != 0) break;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      uint16_t port = 0;
      if (read(fds[0], &port, sizeof(port)) != sizeof(port)) _exit(9);
      _exit(rank_main(port, i, size, bytes_of(i), prefix, seconds));
    }
    close(fds[0]);
    port_pipes.push_back(fds[1]);
    children.push_back(pid);
  }
  Result<std::unique_ptr<StoreServer>> server = StoreServer::start("127.0.0.1", 0, "");
  const uint16_t port = server.ok() ? server.value()->port() : 0;  // 0: the ranks fail to connect
  for (int fd : port_pipes) {
    if (write(fd, &port, sizeof(port)) != sizeof(port)) std::perror("write port");
    close(fd);
  }
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  }
  return codes;
}

size_t same_bytes(int) { return kBytes; }
size_t rank_two_differs(int i) { return i == 2 ? kBytes / 2 : kBytes; }

// Each case in a fresh process (the death-test style re-runs this binary), so that no
// device-runtime thread of the test process is missing from the forked ranks.
TEST(IpcRegions, EveryRankSeesEveryPeersRegion) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int size : {1, 2, 3, 5}) {
    EXPECT_EXIT(
        {
          std::vector<int> codes = run_ranks(size, size, same_bytes, "see", 30);
          bool ok = static_cast<int>(codes.size()) == size;
          for (int c : codes) ok &= c == 0;
          for (int c : codes) std::fprintf(stderr, "rank exit code %d\n", c);
          std::exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << size << " ranks";
  }
}

TEST(IpcRegions, DifferentSizesAreAMismatch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::vector<int> codes = run_ranks(3, 3, rank_two_differs, "mismatch", 10);
        // Rank 2 sees rank 0's size differ from its own; the others fail on rank 2's size,
        // or on a peer that left after its own failure: every rank fails.
        bool ok = codes.size() == 3 && codes[2] == 20;
        for (int c : codes) ok &= c != 0;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Without peer access every rank fails alike, at once, not only the one that cannot map.
TEST(IpcRegions, NoPeerAccessFailsEveryRankAlike) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KOLO_EMULATED_P2P", "0", 1);
        std::vector<int> codes = run_ranks(3, 3, same_bytes, "nop2p", 30);
        bool ok = codes.size() == 3;
        for (int c : codes) ok &= c == 22;
        for (int c : codes) std::fprintf(stderr, "rank exit code %d\n", c);
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(IpcRegions, PeerThatNeverComesIsNamedAtTheDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::vector<int> codes = run_ranks(2, 1, same_bytes, "missing", 1);
        std::exit(codes.size() == 1 && codes[0] == 21 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kolo
