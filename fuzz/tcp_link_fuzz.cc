// libFuzzer target: what a TCP link reads from its peer (transport/tcp).
//
//  - The link handshake's hello, as the acceptor checks it (check_link_hello): the first
//    kLinkHelloBytes of the input, against a rank that expects higher ranks, without and
//    with a secret.
//  - The frame stream of an established link: a real TcpLink over a socketpair, the input
//    written into the other end, progress() run until the link has read everything or
//    failed. Frames are a 16-byte header (tag, length; host order) and the payload; the
//    link matches them against receives posted before and after the bytes arrive (their
//    tags and sizes come from the input's first bytes), or keeps them as early frames.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "transport/tcp/tcp_link.h"
#include "transport/tcp/tcp_mesh.h"

namespace {

using namespace kolo;

void check_hello(const uint8_t* data, size_t size) {
  if (size < kLinkHelloBytes) return;
  uint8_t hello[kLinkHelloBytes];
  std::memcpy(hello, data, sizeof(hello));
  std::array<uint8_t, kLinkChallengeBytes> challenge{};
  MeshOptions options;
  options.rank = size % 3;
  options.size = 4;
  std::vector<std::unique_ptr<Link>> links(options.size);
  Result<int> from = check_link_hello(hello, options, links, challenge);
  if (from.ok()) KOLO_FUZZ_CHECK(from.value() > options.rank && from.value() < options.size);
  options.connect = {true, false, true, true};
  from = check_link_hello(hello, options, links, challenge);
  if (from.ok()) KOLO_FUZZ_CHECK(from.value() != 1);
  options.secret = "fuzz-secret";
  from = check_link_hello(hello, options, links, challenge);
  KOLO_FUZZ_CHECK(!from.ok());  // nobody forges HMAC-SHA256
}

struct Recv {
  uint64_t tag;
  std::vector<char> buffer;
  TransferRequest req;
};

// Input: byte 0 = receives to post before (bits 0-1) and after (bits 2-3) the bytes
// arrive; then per receive a tag byte and a 16-bit size; the rest is the wire.
void read_frames(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int before = data[0] & 3, after = (data[0] >> 2) & 3;
  size_t at = 1;
  std::vector<std::unique_ptr<Recv>> recvs;
  for (int i = 0; i < before + after; ++i) {
    if (size - at < 3) return;
    auto r = std::make_unique<Recv>();
    r->tag = data[at];
    r->buffer.resize((data[at + 1] | data[at + 2] << 8) % 4097);
    at += 3;
    recvs.push_back(std::move(r));
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  Fd writer(sv[1]);
  (void)set_nonblocking(writer.get(), true);
  TcpLink link(0, 1, Fd(sv[0]));
  auto post = [&](Recv& r) {
    Status s = link.post_recv(r.tag, r.buffer.data(), r.buffer.size(), &r.req);
    (void)s;
  };
  for (int i = 0; i < before; ++i) post(*recvs[i]);
  const uint8_t* wire = data + at;
  size_t left = size - at;
  for (int round = 0; round < 1000; ++round) {
    if (left > 0) {
      ssize_t n = ::send(writer.get(), wire, left, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        wire += n;
        left -= static_cast<size_t>(n);
      }
      if (left == 0) ::shutdown(writer.get(), SHUT_WR);
    } else if (round == 0) {
      ::shutdown(writer.get(), SHUT_WR);
    }
    Status s = link.progress();
    if (!s.ok() || link.poll_fd() < 0) break;  // the link failed (or saw the peer leave)
  }
  for (int i = before; i < before + after; ++i) post(*recvs[i]);
  (void)link.progress();
  for (auto& r : recvs) {
    if (r->req.done && r->req.status.ok()) KOLO_FUZZ_CHECK(r->buffer.size() + 16 <= size);  // its frame came whole
  }
  link.close();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_hello(data, size);
  read_frames(data, size);
  return 0;
}
