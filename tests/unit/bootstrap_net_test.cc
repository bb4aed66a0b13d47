// The start-up exchange's tree (engine/bootstrap_net.h): ranks as threads of one process,
// each with its own store client, over real TCP links on 127.0.0.1.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/bootstrap_net.h"
#include "transport/bootstrap/store.h"

namespace kolo {
namespace {

const std::string kSecret = "bootstrap-net-test-secret-012345";

struct Ranks {
  explicit Ranks(int n) : size(n) {
    server = StoreServer::start("127.0.0.1", 0, kSecret).take();
    for (int r = 0; r < n; ++r) {
      clients.push_back(StoreClient::connect(HostPort{"127.0.0.1", server->port()}, kSecret, Deadline(10)).take());
    }
  }
  CommSite site(int rank) const { return CommSite{clients[rank].get(), kSecret, "bn", rank, size, {}}; }
  int size;
  std::unique_ptr<StoreServer> server;
  std::vector<std::unique_ptr<StoreClient>> clients;
};

// Every rank gets every entry, in rank order, for sizes around the tree's shapes, with
// entries of different lengths (one empty), twice on the same links.
TEST(BootstrapNet, AllgatherGivesEveryRankEveryEntry) {
  for (int n : {1, 2, 3, 5, 8, 13}) {
    Ranks ranks(n);
    std::atomic<int> right{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        ASSERT_TRUE(ranks.clients[r]->set_owned(str_cat("bn/live/", r), "1", Deadline(5)).ok());
        auto net = BootstrapNet::create(ranks.site(r), *ranks.clients[r], "bn/live/", Deadline(20));
        ASSERT_TRUE(net.ok()) << net.status().to_string();
        bool same = true;
        for (int round = 0; round < 2; ++round) {
          const std::string mine = r == 1 ? "" : str_cat("rank ", r, " round ", round, std::string(r * 100, 'x'));
          auto all = net.value()->allgather(mine, Deadline(20));
          ASSERT_TRUE(all.ok()) << all.status().to_string();
          ASSERT_EQ(all.value().size(), static_cast<size_t>(n));
          for (int q = 0; q < n; ++q) {
            const std::string want = q == 1 ? "" : str_cat("rank ", q, " round ", round, std::string(q * 100, 'x'));
            same = same && all.value()[q] == want;
          }
        }
        EXPECT_LE(net.value()->tree_degree(), 3);
        if (same) right++;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(right.load(), n) << n << " ranks";
  }
}

// A rank that never comes is named by every rank that waits, not only by its tree
// neighbours, within the deadline.
TEST(BootstrapNet, ARankThatNeverComesIsNamedByAll) {
  const int n = 7;
  const int absent = 5;  // a leaf under rank 2: ranks 1, 3, 4 and 6 are not its neighbours
  Ranks ranks(n);
  std::atomic<int> named{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    threads.emplace_back([&, r] {
      ASSERT_TRUE(ranks.clients[r]->set_owned(str_cat("bn/live/", r), "1", Deadline(5)).ok());
      const auto start = Clock::now();
      Status failed;
      auto net = BootstrapNet::create(ranks.site(r), *ranks.clients[r], "bn/live/", Deadline(3));
      if (!net.ok()) {
        failed = net.status();
      } else {
        failed = net.value()->allgather("x", Deadline(3)).status();
      }
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_FALSE(failed.ok());
      EXPECT_LT(waited, 5.0);
      if (failed.message().find("rank 5 is not alive") != std::string::npos) named++;
      else ADD_FAILURE() << "rank " << r << ": " << failed.to_string();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(named.load(), n - 1);
}

TEST(BootstrapNet, EntriesAreCheckedAsUntrustedInput) {
  std::vector<std::string> entries;
  std::vector<bool> seen;
  std::string blob;
  append_entry(blob, 0, "a");
  append_entry(blob, 2, "ccc");
  EXPECT_TRUE(decode_entries(blob, 3, false, &entries, &seen).ok());
  entries.clear();
  seen.clear();
  EXPECT_FALSE(decode_entries(blob, 3, true, &entries, &seen).ok());  // rank 1 missing
  entries.clear();
  seen.clear();
  EXPECT_FALSE(decode_entries(blob, 2, false, &entries, &seen).ok());  // rank 2 of 2
  std::string twice = blob;
  append_entry(twice, 0, "again");
  entries.clear();
  seen.clear();
  EXPECT_FALSE(decode_entries(twice, 3, false, &entries, &seen).ok());
  for (size_t cut = 1; cut < blob.size(); ++cut) {
    entries.clear();
    seen.clear();
    if (cut == 9) continue;  // a whole first entry: valid on its own
    EXPECT_FALSE(decode_entries(blob.substr(0, cut), 3, false, &entries, &seen).ok()) << cut;
  }
}

}  // namespace
}  // namespace kolo
