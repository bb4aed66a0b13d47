// The TCP link handshake (transport/tcp/tcp_mesh.cc): both ends prove the job's secret on
// a fresh challenge, so a wrong secret, a recorded hello played back, and a listener that
// does not know the secret are all refused; the listener binds the chosen address only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <sstream>

#include "security_util.h"
#include "support/crypto.h"

namespace kolo::security_test {
namespace {

TEST(TcpLinkAuth, SameSecretFormsAWorkingMesh) {
  Job job;
  MeshRank rank0(job, mesh_options(0, 2));
  MeshRank rank1(job, mesh_options(1, 2));
  Result<Links>& links0 = rank0.join();
  Result<Links>& links1 = rank1.join();
  ASSERT_TRUE(links0.ok()) << links0.status().to_string();
  ASSERT_TRUE(links1.ok()) << links1.status().to_string();
  EXPECT_TRUE(carries(*links0.value()[1], *links1.value()[0], "from 0"));
  EXPECT_TRUE(carries(*links1.value()[0], *links0.value()[1], "from 1"));
}

// A rank (or an attacker) with another secret is refused with a clear error, and the real
// rank that comes after it still gets its link.
TEST(TcpLinkAuth, WrongSecretIsRefusedAndTheMeshStillForms) {
  Job job;
  MeshRank rank0(job, mesh_options(0, 2));
  {
    MeshRank intruder(job, mesh_options(1, 2, "not-the-job-secret-0123456789abcd"));
    Result<Links>& refused = intruder.join();
    ASSERT_FALSE(refused.ok()) << "a rank with the wrong secret got a link";
    EXPECT_NE(refused.status().message().find("KOLO_SECRET"), std::string::npos) << refused.status().to_string();
  }
  MeshRank rank1(job, mesh_options(1, 2));
  Result<Links>& links0 = rank0.join();
  Result<Links>& links1 = rank1.join();
  ASSERT_TRUE(links0.ok()) << links0.status().to_string();
  ASSERT_TRUE(links1.ok()) << links1.status().to_string();
  EXPECT_TRUE(carries(*links0.value()[1], *links1.value()[0], "the real rank 1"));
}

// Job A: rank 1's hello is recorded by a listener standing in for rank 0. Job B, with the
// same KOLO_SECRET and so the same communicator names ("world0", "sec"): the recording is
// played to rank 0 before the real rank 1 connects. It must be refused, or rank 0 would
// send rank 1's data to whoever replayed it.
TEST(TcpLinkAuth, RecordedHelloReplayedInALaterJobIsRefused) {
  std::string recorded;
  {
    Job job_a;
    Result<Fd> recorder = listen_tcp("127.0.0.1", 0);
    ASSERT_TRUE(recorder.ok());
    uint16_t port = local_port(recorder.value().get()).value();
    auto store = job_a.client();
    ASSERT_TRUE(store->set("sec/tcp/0", str_cat("127.0.0.1:", port), Deadline(5)).ok());
    MeshRank rank1(job_a, mesh_options(1, 2), 3);
    Result<Fd> victim = accept_tcp(recorder.value().get(), Deadline(5));
    ASSERT_TRUE(victim.ok());
    uint8_t challenge[32];
    ASSERT_TRUE(random_bytes(challenge, sizeof(challenge)).ok());
    ASSERT_TRUE(write_full(victim.value().get(), challenge, sizeof(challenge), Deadline(5)).ok());
    recorded = read_until_quiet(victim.value().get(), 300);
    ASSERT_FALSE(recorded.empty()) << "rank 1 sent no hello";
    victim = Fd();
    // The recorder could not answer: rank 1 must not believe it reached rank 0.
    EXPECT_FALSE(rank1.join().ok()) << "rank 1 accepted a listener that never proved the secret";
  }
  Job job_b;
  MeshRank rank0(job_b, mesh_options(0, 2));
  auto store = job_b.client();
  Result<std::string> address = store->get("sec/tcp/0", Deadline(5));  // on the wire: no encryption
  ASSERT_TRUE(address.ok());
  Result<Fd> replay = connect_tcp(HostPort{"127.0.0.1", port_of(address.value())}, Deadline(5));
  ASSERT_TRUE(replay.ok());
  ASSERT_TRUE(write_full(replay.value().get(), recorded.data(), recorded.size(), Deadline(5)).ok());
  bool closed = false;
  std::string answer = read_until_quiet(replay.value().get(), 6000, &closed);
  EXPECT_TRUE(closed) << "rank 0 kept the replayed connection open";
  EXPECT_LE(answer.size(), 32u) << "rank 0 answered the replayed hello (it sent more than its challenge)";

  MeshRank rank1(job_b, mesh_options(1, 2));
  Result<Links>& links0 = rank0.join();
  Result<Links>& links1 = rank1.join();
  ASSERT_TRUE(links0.ok()) << links0.status().to_string();
  ASSERT_TRUE(links1.ok()) << links1.status().to_string();
  EXPECT_TRUE(carries(*links0.value()[1], *links1.value()[0], "for the real rank 1 only"));
}

// Whoever listens at the address the store gave may not be the rank (a port taken over
// after the rank died): the connector checks the listener's answer.
TEST(TcpLinkAuth, ListenerWithoutTheSecretIsDetected) {
  Job job;
  Result<Fd> impostor = listen_tcp("127.0.0.1", 0);
  ASSERT_TRUE(impostor.ok());
  uint16_t port = local_port(impostor.value().get()).value();
  auto store = job.client();
  ASSERT_TRUE(store->set("sec/tcp/0", str_cat("127.0.0.1:", port), Deadline(5)).ok());
  MeshRank rank1(job, mesh_options(1, 2), 5);
  Result<Fd> conn = accept_tcp(impostor.value().get(), Deadline(5));
  ASSERT_TRUE(conn.ok());
  uint8_t challenge[32] = {};
  ASSERT_TRUE(write_full(conn.value().get(), challenge, sizeof(challenge), Deadline(5)).ok());
  std::string hello = read_until_quiet(conn.value().get(), 300);
  uint8_t guess[32];  // without the secret, an answer is a guess
  ASSERT_TRUE(random_bytes(guess, sizeof(guess)).ok());
  ASSERT_TRUE(write_full(conn.value().get(), guess, sizeof(guess), Deadline(5)).ok());
  Result<Links>& links1 = rank1.join();
  ASSERT_FALSE(links1.ok()) << "rank 1 took a listener without the secret for rank 0";
  EXPECT_NE(links1.status().message().find("did not prove the job's secret"), std::string::npos)
      << links1.status().to_string();
}

// A connection that says nothing is dropped after a few seconds and does not keep the real
// peer out (denial of service is bounded, not prevented).
TEST(TcpLinkAuth, SilentConnectionIsDroppedAndThePeerStillConnects) {
  Job job;
  MeshRank rank0(job, mesh_options(0, 2), 20);
  auto store = job.client();
  Result<std::string> address = store->get("sec/tcp/0", Deadline(5));
  ASSERT_TRUE(address.ok());
  Result<Fd> silent = connect_tcp(HostPort{"127.0.0.1", port_of(address.value())}, Deadline(5));
  ASSERT_TRUE(silent.ok());
  MeshRank rank1(job, mesh_options(1, 2), 20);
  Result<Links>& links0 = rank0.join();
  Result<Links>& links1 = rank1.join();
  ASSERT_TRUE(links0.ok()) << links0.status().to_string();
  ASSERT_TRUE(links1.ok()) << links1.status().to_string();
  EXPECT_TRUE(carries(*links0.value()[1], *links1.value()[0], "after the silent one"));
}

// KOLO_INSECURE (empty secret): the same handshake, unchecked, still connects.
TEST(TcpLinkAuth, InsecureModeStillConnects) {
  Job job("");
  MeshRank rank0(job, mesh_options(0, 2, ""));
  MeshRank rank1(job, mesh_options(1, 2, ""));
  ASSERT_TRUE(rank0.join().ok()) << rank0.join().status().to_string();
  ASSERT_TRUE(rank1.join().ok()) << rank1.join().status().to_string();
}

// LISTEN entries of /proc/net/tcp{,6} for a port: their local addresses, as the kernel
// writes them (hex, e.g. 0100007F for 127.0.0.1).
std::vector<std::string> listeners_on(uint16_t port) {
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      size_t colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) found.push_back(local.substr(0, colon));
    }
  }
  return found;
}

// The link listener binds the address chosen for it (KOLO_SOCKET_IFNAME's, or the one that
// reaches the store), not every interface: on 127.0.0.2, 127.0.0.1 is refused.
TEST(TcpLinkAuth, ListensOnlyOnTheChosenAddress) {
  Job job;
  MeshRank rank0(job, mesh_options(0, 2, kSecret, "sec", "127.0.0.2"));
  auto store = job.client();
  Result<std::string> address = store->get("sec/tcp/0", Deadline(5));
  ASSERT_TRUE(address.ok());
  EXPECT_EQ(address.value().rfind("127.0.0.2:", 0), 0u) << address.value();
  uint16_t port = port_of(address.value());
  std::vector<std::string> listening = listeners_on(port);
  ASSERT_EQ(listening.size(), 1u);
  EXPECT_EQ(listening[0], "0200007F") << "listening on " << listening[0] << ", not 127.0.0.2 alone";

  Fd other(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1
  EXPECT_NE(::connect(other.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0)
      << "the link port answers on 127.0.0.1 too";

  MeshRank rank1(job, mesh_options(1, 2, kSecret, "sec", "127.0.0.2"));
  ASSERT_TRUE(rank0.join().ok()) << rank0.join().status().to_string();
  ASSERT_TRUE(rank1.join().ok()) << rank1.join().status().to_string();
  EXPECT_TRUE(listeners_on(port).empty()) << "the listener outlived start-up";
}

}  // namespace
}  // namespace kolo::security_test
