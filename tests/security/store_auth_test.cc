// The rendezvous store's authentication as an attacker sees it, beyond the protocol tests
// in tests/unit/store_test.cc: a recorded session played back by a fake server, a wrong
// secret refused with a clear error while the store keeps serving, the HMAC itself
// against the RFC's vectors, and where a store listens.
#include <poll.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "security_util.h"
#include "support/crypto.h"
#include "transport/bootstrap/store_protocol.h"

namespace kolo::security_test {
namespace {

TEST(Hmac, MatchesRfc4231) {
  // RFC 4231, test case 2.
  Mac mac = hmac_sha256("Jefe", "what do ya want for nothing?", 28);
  EXPECT_EQ(to_hex(mac.data(), mac.size()), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  Mac other = mac;
  other[31] ^= 1;
  EXPECT_TRUE(mac_equal(mac, mac));
  EXPECT_FALSE(mac_equal(mac, other));
}

// The client side of a connection through a relay that keeps what the server sent.
void relay_and_record(int listen_fd, const HostPort& server, std::string* from_server) {
  Result<Fd> client = accept_tcp(listen_fd, Deadline(10));
  if (!client.ok()) return;
  Result<Fd> upstream = connect_tcp(server, Deadline(10));
  if (!upstream.ok()) return;
  char chunk[4096];
  while (true) {
    pollfd fds[2] = {{client.value().get(), POLLIN, 0}, {upstream.value().get(), POLLIN, 0}};
    if (::poll(fds, 2, 10000) <= 0) return;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, chunk, sizeof(chunk));
      if (n <= 0) return;
      if (i == 1) from_server->append(chunk, static_cast<size_t>(n));
      int to = i == 0 ? upstream.value().get() : client.value().get();
      if (!write_full(to, chunk, static_cast<size_t>(n), Deadline(5)).ok()) return;
    }
  }
}

// Someone on the path records a client's whole session with the store. Later (same
// KOLO_SECRET: a fixed secret reused across jobs) they answer a client in place of the
// store and play the recording back. The client must refuse it, or it would take recorded
// (stale, or chosen) rendezvous data for the job's.
TEST(StoreAuth, RecordedSessionPlayedBackByAFakeServerIsRefused) {
  Job job;
  Result<Fd> relay = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(relay.ok());
  HostPort relay_address{"127.0.0.1", local_port(relay.value().get()).value()};
  std::string recorded;
  std::thread recorder([&] { relay_and_record(relay.value().get(), job.address(), &recorded); });
  {
    auto client = StoreClient::connect(relay_address, job.secret, Deadline(10));
    ASSERT_TRUE(client.ok()) << client.status().to_string();
  }  // the client closes: the relay ends
  recorder.join();
  ASSERT_GT(recorded.size(), 32u) << "the relay saw no reply";

  std::atomic<bool> stop{false};
  std::thread fake_server([&] {
    Result<Fd> victim = accept_tcp(relay.value().get(), Deadline(10));
    if (!victim.ok()) return;
    (void)write_full(victim.value().get(), recorded.data(), recorded.size(), Deadline(5));
    while (!stop.load()) read_until_quiet(victim.value().get(), 100);
  });
  auto fooled = StoreClient::connect(relay_address, job.secret, Deadline(5));
  stop = true;
  fake_server.join();
  ASSERT_FALSE(fooled.ok()) << "the client accepted a recorded session from a fake store";
  EXPECT_NE(fooled.status().message().find("authentication"), std::string::npos) << fooled.status().to_string();
}

// A rank with another secret is told so in words, the store counts it, and the job's
// ranks go on using the store.
TEST(StoreAuth, WrongSecretGetsAClearErrorAndTheStoreGoesOn) {
  Job job;
  auto rank0 = job.client();
  ASSERT_TRUE(rank0 && rank0->set("before", "1", Deadline(5)).ok());
  auto intruder = StoreClient::connect(job.address(), "another-secret-0123456789abcdefgh", Deadline(5));
  ASSERT_FALSE(intruder.ok());
  EXPECT_NE(intruder.status().message().find("is KOLO_SECRET the same on every rank?"), std::string::npos)
      << intruder.status().to_string();
  EXPECT_EQ(job.server->rejected_connections(), 1u);
  auto rank1 = job.client();
  ASSERT_TRUE(rank1);
  Result<std::string> value = rank1->get("before", Deadline(5));
  ASSERT_TRUE(value.ok()) << value.status().to_string();
  EXPECT_EQ(value.value(), "1");
}

// A store whose rank exits while another rank joins (it failed its own start-up) drops the
// connection, as it drops a wrong secret's: the joining rank is told that the store is gone,
// not that the secrets differ.
TEST(StoreAuth, AStoreThatExitsMidHandshakeIsNotCalledASecretMismatch) {
  Result<Fd> listening = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(listening.ok());
  HostPort address{"127.0.0.1", local_port(listening.value().get()).value()};
  std::thread exiting_store([&] {
    Result<Fd> joiner = accept_tcp(listening.value().get(), Deadline(10));
    if (!joiner.ok()) return;
    std::string nonce(store::kNonceBytes, 'n');
    (void)write_full(joiner.value().get(), nonce.data(), nonce.size(), Deadline(5));
    (void)read_full(joiner.value().get(), nonce.data(), nonce.size(), Deadline(5));  // the joiner's nonce
    listening.value().reset();  // the store's process ends: no more connections, then this one closes
  });
  auto joined = StoreClient::connect(address, "a-secret-0123456789abcdefghijklmnop", Deadline(10));
  exiting_store.join();
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().message().find("KOLO_SECRET"), std::string::npos) << joined.status().to_string();
  EXPECT_NE(joined.status().message().find("accepts no other"), std::string::npos) << joined.status().to_string();
}

// Nothing of the secret shows in what a refused party is told.
TEST(StoreAuth, ErrorsDoNotCarryTheSecret) {
  Job job;
  const std::string wrong = "the-wrong-secret-0123456789abcdefg";
  auto intruder = StoreClient::connect(job.address(), wrong, Deadline(5));
  ASSERT_FALSE(intruder.ok());
  const std::string& message = intruder.status().message();
  for (const std::string& secret : {job.secret, wrong}) {
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
    EXPECT_EQ(message.find(to_hex(secret.data(), secret.size())), std::string::npos) << message;
  }
}

// A store reached at a literal address of this machine listens there alone; a host name
// or another machine's address leaves it on every interface (the name may resolve to
// another address here than on the peers).
TEST(StoreListen, OnlyOnALiteralLocalAddress) {
  EXPECT_EQ(listen_host_for("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(listen_host_for("127.0.1.1"), "127.0.1.1");  // all of 127/8 is local
  EXPECT_EQ(listen_host_for("localhost"), "");
  EXPECT_EQ(listen_host_for("192.0.2.1"), "");  // TEST-NET-1: no machine's
  EXPECT_EQ(listen_host_for(""), "");
  EXPECT_EQ(listen_host_for("not an address"), "");

  auto server = StoreServer::start(listen_host_for("127.0.0.1"), 0, std::string(32, 's'));
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::ifstream tcp("/proc/net/tcp");
  std::string line, want = ":" + [](unsigned port) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "%04X", port);
    return std::string(hex);
  }(server.value()->port());
  bool found = false;
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state != "0A" || local.size() < want.size() || local.substr(local.size() - want.size()) != want) continue;
    EXPECT_EQ(local.substr(0, 8), "0100007F") << "the store listens on " << local << ", not 127.0.0.1 alone";
    found = true;
  }
  EXPECT_TRUE(found) << "no listener at the store's port in /proc/net/tcp";
}

}  // namespace
}  // namespace kolo::security_test
