// Connects a communicator's ranks pairwise over TCP, using the store to exchange addresses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"
#include "transport/link.h"

namespace kolo {

struct MeshOptions {
  std::string prefix;  // store key prefix, unique per communicator
  int rank = 0;
  int size = 1;
  std::string secret;     // raw bytes; authenticates the link handshake (empty = none)
  std::string listen_ip;  // address peers connect to
  std::vector<bool> connect;  // per rank: join it over tcp (empty = every rank); symmetric
  // Lazy links (TcpLinkMaker::make): lower ranks connect too, not only higher ones.
  bool any_direction = false;
};

// The link handshake's hello, as the acceptor reads it off the wire (tcp_mesh.cc has the
// protocol): the rank it comes from when it is one this rank expects (`links` holds the
// peers already connected) and proves the secret for `challenge`, else why it is refused.
constexpr size_t kLinkChallengeBytes = 32;
constexpr size_t kLinkHelloBytes = 16 + kLinkChallengeBytes + 32;
Result<int> check_link_hello(const uint8_t (&hello)[kLinkHelloBytes], const MeshOptions& options,
                             const std::vector<std::unique_ptr<Link>>& links,
                             const std::array<uint8_t, kLinkChallengeBytes>& challenge);

// Makes a rank's TCP links: it listens, publishes its address under prefix/tcp/rank, and a
// thread of its own answers the peers' connections, each opening with the authenticated
// handshake. make(peer) is lazy (MeshOptions::any_direction): whichever end needs the link
// first connects. When both connect at once, the connection made by the lower rank is the
// link: the higher rank's acceptor takes it, the lower rank's acceptor closes the other, and
// its maker then finds the peer's connection taken by its acceptor.
class TcpLinkMaker final : public LinkMaker {
 public:
  static Result<std::unique_ptr<TcpLinkMaker>> start(StoreClient& store, const MeshOptions& options,
                                                     const Deadline& deadline);
  ~TcpLinkMaker() override;
  Result<std::unique_ptr<Link>> make(int peer, const Deadline& deadline) override;
  // The eager mesh's halves: connect to `peer` now (failing at once if the handshake
  // fails), or wait for `peer` to connect.
  Result<std::unique_ptr<Link>> connect_now(int peer, bool wait_if_declined, const Deadline& deadline);
  Result<std::unique_ptr<Link>> wait_for(int peer, const Deadline& deadline);
  void stop() override;
  const std::string& address() const { return address_; }

  class Impl;

 private:
  explicit TcpLinkMaker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

// Returns one link per peer (null at `rank` and at ranks not to connect), all made now. Rank r connects to every lower
// rank and accepts every higher one; each connection opens with an authenticated handshake.
Result<std::vector<std::unique_ptr<Link>>> connect_tcp_mesh(StoreClient& store, const MeshOptions& options,
                                                           const Deadline& deadline);

}  // namespace kolo
