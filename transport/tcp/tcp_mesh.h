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
};

// The link handshake's hello, as the acceptor reads it off the wire (tcp_mesh.cc has the
// protocol): the rank it comes from when it is one this rank expects (`links` holds the
// peers already connected) and proves the secret for `challenge`, else why it is refused.
constexpr size_t kLinkChallengeBytes = 32;
constexpr size_t kLinkHelloBytes = 16 + kLinkChallengeBytes + 32;
Result<int> check_link_hello(const uint8_t (&hello)[kLinkHelloBytes], const MeshOptions& options,
                             const std::vector<std::unique_ptr<Link>>& links,
                             const std::array<uint8_t, kLinkChallengeBytes>& challenge);

// Returns one link per peer (null at `rank` and at ranks not to connect). Rank r connects to every lower rank and
// accepts every higher one; each connection opens with an authenticated handshake.
Result<std::vector<std::unique_ptr<Link>>> connect_tcp_mesh(StoreClient& store, const MeshOptions& options,
                                                           const Deadline& deadline);

}  // namespace kolo
