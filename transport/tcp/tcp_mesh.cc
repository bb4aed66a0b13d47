#include "transport/tcp/tcp_mesh.h"

#include <algorithm>
#include <cstring>

#include "support/crypto.h"
#include "support/log.h"
#include "transport/tcp/tcp_link.h"

namespace kolo {
namespace {

constexpr uint32_t kHandshakeMagic = 0x6b6f6c6f;  // "kolo"

struct Handshake {
  uint32_t magic;
  int32_t from;
  int32_t to;
  uint32_t reserved;
  uint8_t mac[32];
};

Mac handshake_mac(const MeshOptions& options, int from, int to) {
  std::string text = str_cat("kolo-link|", options.prefix, "|", from, "|", to);
  return hmac_sha256(options.secret, text.data(), text.size());
}

bool wanted(const MeshOptions& options, int rank) {
  return rank != options.rank && (options.connect.empty() || options.connect[rank]);
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
    Handshake hs{};
    // A stray connection that sends nothing must not hold up the peers behind it.
    Deadline handshake_deadline(std::min(5.0, deadline.remaining_seconds()));
    Status s = read_full(fd.value().get(), &hs, sizeof(hs), handshake_deadline);
    Mac mac{};
    if (s.ok()) std::memcpy(mac.data(), hs.mac, mac.size());
    bool valid = s.ok() && hs.magic == kHandshakeMagic && hs.to == options.rank && hs.from > options.rank &&
                 hs.from < options.size && wanted(options, hs.from) && !links[hs.from] &&
                 (options.secret.empty() || mac_equal(mac, handshake_mac(options, hs.from, hs.to)));
    if (!valid) {
      log_warn(Subsys::kTransport, "rank ", options.rank, " dropped a connection with a bad handshake (from=",
               hs.from, ", to=", hs.to, ")");
      continue;
    }
    links[hs.from] = std::make_unique<TcpLink>(options.rank, hs.from, fd.take());
    ++accepted;
  }
  return Status();
}

}  // namespace

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
    if (!fd.ok()) {
      return fd.status().with_context(str_cat("rank ", options.rank, " connecting to rank ", peer, " at ",
                                              address.value(), ": "));
    }
    Handshake hs{kHandshakeMagic, options.rank, peer, 0, {}};
    Mac mac = handshake_mac(options, options.rank, peer);
    std::memcpy(hs.mac, mac.data(), mac.size());
    KOLO_TRY(write_full(fd.value().get(), &hs, sizeof(hs), deadline));
    links[peer] = std::make_unique<TcpLink>(options.rank, peer, fd.take());
  }
  KOLO_TRY(accept_peers(listener.value().get(), options, links, deadline));
  log_info(Subsys::kTransport, "rank ", options.rank, " connected to ", peers, " peers over tcp (",
           self.to_string(), ")");
  return links;
}

}  // namespace kolo
