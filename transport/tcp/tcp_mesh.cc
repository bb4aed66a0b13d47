#include "transport/tcp/tcp_mesh.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "support/crypto.h"
#include "support/log.h"
#include "transport/tcp/tcp_link.h"

namespace kolo {
namespace {

// The link handshake is a challenge-response in which both ends prove the job's secret:
//
//   acceptor  -> connector: challenge A (32 random bytes, fresh per connection)
//   connector -> acceptor : Hello{magic, from, to, challenge C, HMAC(secret, "hello" | prefix | from | to | A | C)}
//   acceptor  -> connector: HMAC(secret, "answer" | prefix | from | to | A | C)
//
// A binds the connector's MAC to this connection, so a hello recorded on the network (in
// this job, or in an earlier job with the same KOLO_SECRET and so the same communicator
// names) is refused; C does the same for the acceptor's answer. The two labels keep a MAC
// from being reflected back to its sender as the other message. An earlier version sent
// only HMAC(prefix | from | to): anyone who had seen it once could replay it, and the
// acceptor proved nothing to the connector.
constexpr uint32_t kHandshakeMagic = 0x6b6f6c32;  // "kol2": the challenge-response handshake
constexpr size_t kChallengeBytes = 32;
using Challenge = std::array<uint8_t, kChallengeBytes>;

struct Hello {
  uint32_t magic;
  int32_t from;
  int32_t to;
  uint32_t reserved;
  uint8_t challenge[kChallengeBytes];
  uint8_t mac[32];
};
static_assert(sizeof(Hello) == kLinkHelloBytes && kChallengeBytes == kLinkChallengeBytes);

Mac handshake_mac(const MeshOptions& options, const char* label, int from, int to, const Challenge& a,
                  const uint8_t* c) {
  std::string text = str_cat("kolo-link/2|", label, "|", options.prefix, "|", from, "|", to, "|");
  text.append(reinterpret_cast<const char*>(a.data()), a.size());
  text.append(reinterpret_cast<const char*>(c), kChallengeBytes);
  return hmac_sha256(options.secret, text.data(), text.size());
}

bool mac_ok(const MeshOptions& options, const uint8_t* got, const Mac& expected) {
  if (options.secret.empty()) return true;  // KOLO_INSECURE: the same messages, unchecked
  Mac mac{};
  std::memcpy(mac.data(), got, mac.size());
  return mac_equal(mac, expected);
}

bool wanted(const MeshOptions& options, int rank) {
  return rank != options.rank && (options.connect.empty() || options.connect[rank]);
}

// One accepted connection: challenge, hello, answer. On any failure the connection is
// dropped and the reason returned for the log; the acceptor goes on waiting for its peers.
Result<int> answer_peer(int fd, const MeshOptions& options, const std::vector<std::unique_ptr<Link>>& links,
                        const Deadline& deadline) {
  Challenge a{};
  KOLO_TRY(random_bytes(a.data(), a.size()));
  KOLO_TRY(write_full(fd, a.data(), a.size(), deadline));
  uint8_t bytes[kLinkHelloBytes];
  KOLO_TRY(read_full(fd, bytes, sizeof(bytes), deadline));
  Result<int> from = check_link_hello(bytes, options, links, a);
  if (!from.ok()) return from.status();
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  Mac answer = handshake_mac(options, "answer", hello.from, hello.to, a, hello.challenge);
  KOLO_TRY(write_full(fd, answer.data(), answer.size(), deadline));
  return from.value();
}

Status accept_peers(int listen_fd, const MeshOptions& options, std::vector<std::unique_ptr<Link>>& links,
                    const Deadline& deadline) {
  int expected = 0;
  for (int r = options.rank + 1; r < options.size; ++r) expected += wanted(options, r);
  int accepted = 0;
  while (accepted < expected) {
    Result<Fd> fd = accept_tcp(listen_fd, deadline);
    if (!fd.ok()) {
      return fd.status().with_context(str_cat("rank ", options.rank, " waiting for ", expected - accepted,
                                              " higher ranks to connect: "));
    }
    // A stray connection that sends nothing must not hold up the peers behind it.
    Deadline handshake_deadline(std::min(5.0, deadline.remaining_seconds()));
    Result<int> from = answer_peer(fd.value().get(), options, links, handshake_deadline);
    if (!from.ok()) {
      log_warn(Subsys::kTransport, "rank ", options.rank, " dropped a connection with a bad handshake: ",
               from.status().message());
      continue;
    }
    links[from.value()] = std::make_unique<TcpLink>(options.rank, from.value(), fd.take());
    ++accepted;
  }
  return Status();
}

// The connector's half: answers the challenge and checks that the acceptor knows the secret
// too (the address came from the store, but whoever listens there now may not be the rank).
Status greet_peer(int fd, const MeshOptions& options, int peer, const Deadline& deadline) {
  const char* hint = " — is KOLO_SECRET the same on every rank?";
  Challenge a{};
  Status s = read_full(fd, a.data(), a.size(), deadline);
  if (!s.ok()) return s.with_context("waiting for its link challenge: ");
  Hello hello{kHandshakeMagic, options.rank, peer, 0, {}, {}};
  KOLO_TRY(random_bytes(hello.challenge, sizeof(hello.challenge)));
  Mac mac = handshake_mac(options, "hello", options.rank, peer, a, hello.challenge);
  std::memcpy(hello.mac, mac.data(), mac.size());
  KOLO_TRY(write_full(fd, &hello, sizeof(hello), deadline));
  Mac answer{};
  s = read_full(fd, answer.data(), answer.size(), deadline);
  if (!s.ok()) {
    return Status(s.code(), str_cat("no answer to the link handshake (", s.message(), "): the peer refused it", hint));
  }
  if (!mac_ok(options, answer.data(), handshake_mac(options, "answer", options.rank, peer, a, hello.challenge))) {
    return error(Code::kRemote, "the listener did not prove the job's secret: not rank ", peer,
                 " of this job (another job on its port?)", hint);
  }
  return Status();
}

}  // namespace

Result<int> check_link_hello(const uint8_t (&bytes)[kLinkHelloBytes], const MeshOptions& options,
                             const std::vector<std::unique_ptr<Link>>& links,
                             const std::array<uint8_t, kLinkChallengeBytes>& challenge) {
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  const Challenge& a = challenge;
  if (hello.magic != kHandshakeMagic) {
    return error(Code::kRemote, "not a kolo link handshake (magic ", hello.magic, "; another kolo version?)");
  }
  if (hello.to != options.rank || hello.from <= options.rank || hello.from >= options.size ||
      !wanted(options, hello.from)) {
    return error(Code::kRemote, "handshake from rank ", hello.from, " to rank ", hello.to,
                 " is not one this rank expects");
  }
  if (links[hello.from]) return error(Code::kRemote, "rank ", hello.from, " is already connected");
  if (!mac_ok(options, hello.mac, handshake_mac(options, "hello", hello.from, hello.to, a, hello.challenge))) {
    return error(Code::kRemote, "handshake claiming rank ", hello.from,
                 " failed authentication (wrong KOLO_SECRET, forged or replayed)");
  }
  return static_cast<int>(hello.from);
}

Result<std::vector<std::unique_ptr<Link>>> connect_tcp_mesh(StoreClient& store, const MeshOptions& options,
                                                           const Deadline& deadline) {
  std::vector<std::unique_ptr<Link>> links(options.size);
  int peers = 0;
  for (int r = 0; r < options.size; ++r) peers += wanted(options, r);
  if (peers == 0) return links;
  Result<Fd> listener = listen_tcp(options.listen_ip, 0);
  if (!listener.ok()) return listener.status().with_context("tcp transport: ");
  Result<uint16_t> port = local_port(listener.value().get());
  if (!port.ok()) return port.status();
  HostPort self{options.listen_ip, port.value()};
  KOLO_TRY(store.set(str_cat(options.prefix, "/tcp/", options.rank), self.to_string(), deadline));

  for (int peer = 0; peer < options.rank; ++peer) {
    if (!wanted(options, peer)) continue;
    Result<std::string> address = store.get(str_cat(options.prefix, "/tcp/", peer), deadline);
    if (!address.ok()) return address.status();
    Result<HostPort> target = parse_host_port(address.value());
    if (!target.ok()) return target.status();
    Result<Fd> fd = connect_tcp(target.value(), deadline);
    Status greeted = fd.ok() ? greet_peer(fd.value().get(), options, peer, deadline) : fd.status();
    if (!greeted.ok()) {
      return greeted.with_context(str_cat("rank ", options.rank, " connecting to rank ", peer, " at ",
                                          address.value(), ": "));
    }
    links[peer] = std::make_unique<TcpLink>(options.rank, peer, fd.take());
  }
  KOLO_TRY(accept_peers(listener.value().get(), options, links, deadline));
  log_info(Subsys::kTransport, "rank ", options.rank, " connected to ", peers, " peers over tcp (",
           self.to_string(), ")");
  return links;
}

}  // namespace kolo
