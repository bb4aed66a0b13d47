// libFuzzer target: the frames a shared-memory link reads from the ring its peer writes
// (transport/shm/shm_link.cc: ShmLink::progress, on_header). A real two-member Domain is
// made once, both members in this process (each in its own thread, over an in-process
// store); for every input, the channels are reset, a ShmLink for member 0 is made, and
// the input is written into the ring from member 1, as much as the ring holds at a time,
// with progress() run in between. Frames are 32-byte headers (u64 tag, u64 bytes, u64
// address, u32 kind: 1 data, 2 request-to-send, 3 acknowledgement; u32 reserved; host
// order) and data payloads. A request-to-send makes the link read `bytes` at `address`
// of the peer's process (this one) with process_vm_readv, into a posted receive of that
// size: an address that is not mapped is an error, not a crash.
//
// Byte 0: receives to post before (bits 0-1) and after (bits 2-3) the frames arrive; then
// per receive a tag byte and a 16-bit size (at most 4096); the rest is the ring's bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "transport/bootstrap/store.h"
#include "transport/shm/shm_domain.h"
#include "transport/shm/shm_link.h"

namespace {

using namespace kolo;
using namespace kolo::shm;

struct Fixture {
  std::unique_ptr<StoreServer> server;
  std::unique_ptr<StoreClient> clients[2];
  std::unique_ptr<Domain> domains[2];
};

Fixture* make_fixture() {
  auto* f = new Fixture;
  Result<std::unique_ptr<StoreServer>> server = StoreServer::start("127.0.0.1", 0, "");
  if (!server.ok()) return nullptr;
  f->server = server.take();
  for (auto& client : f->clients) {
    Result<std::unique_ptr<StoreClient>> c = StoreClient::connect(HostPort{"127.0.0.1", f->server->port()}, "",
                                                                  Deadline(30));
    if (!c.ok()) return nullptr;
    client = c.take();
  }
  Result<std::unique_ptr<Domain>> made[2] = {Status(), Status()};
  auto create = [&](int i) {
    DomainOptions options;
    options.key_prefix = "fuzz";
    options.members = {0, 1};
    options.my_index = i;
    options.slots = 4;
    options.slot_bytes = 4096;
    options.ring_bytes = 4096;
    made[i] = Domain::create(*f->clients[i], options, Deadline(30));
  };
  std::thread other(create, 1);
  create(0);
  other.join();
  for (int i = 0; i < 2; ++i) {
    if (!made[i].ok()) {
      std::fprintf(stderr, "shm_link_fuzz: no domain: %s\n", made[i].status().message().c_str());
      return nullptr;
    }
    f->domains[i] = made[i].take();
  }
  return f;
}

struct Recv {
  uint64_t tag;
  std::vector<char> buffer;
  TransferRequest req;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* fixture = make_fixture();
  if (fixture == nullptr) std::abort();
  if (size < 1) return 0;
  Domain& domain = *fixture->domains[0];
  const int before = data[0] & 3, after = (data[0] >> 2) & 3;
  size_t at = 1;
  std::vector<std::unique_ptr<Recv>> recvs;
  for (int i = 0; i < before + after; ++i) {
    if (size - at < 3) return 0;
    auto r = std::make_unique<Recv>();
    r->tag = data[at];
    r->buffer.resize((data[at + 1] | data[at + 2] << 8) % 4097);
    at += 3;
    recvs.push_back(std::move(r));
  }
  ChannelControl& in = domain.channel(1, 0);
  ChannelControl& out = domain.channel(0, 1);
  in.head.store(0);
  in.tail.store(0);
  out.head.store(0);
  out.tail.store(0);
  char* ring = domain.ring(1, 0);
  const size_t ring_bytes = domain.ring_bytes();
  {
    ShmLink link(domain, 0, 1);
    for (int i = 0; i < before; ++i) (void)link.post_recv(recvs[i]->tag, recvs[i]->buffer.data(), recvs[i]->buffer.size(), &recvs[i]->req);
    const uint8_t* wire = data + at;
    size_t left = size - at;
    uint64_t head = 0;
    for (int round = 0; round < 1000; ++round) {
      const uint64_t tail = in.tail.load();
      size_t n = std::min(left, ring_bytes - static_cast<size_t>(head - tail));
      for (size_t k = 0; k < n; ++k) ring[(head + k) & (ring_bytes - 1)] = static_cast<char>(wire[k]);
      wire += n;
      left -= n;
      head += n;
      in.head.store(head);
      out.tail.store(out.head.load());  // the peer takes whatever the link sends (acknowledgements)
      Status s = link.progress();
      if (!s.ok()) break;
      if (left == 0 && in.tail.load() == head) break;  // everything read
    }
    for (int i = before; i < before + after; ++i) {
      (void)link.post_recv(recvs[i]->tag, recvs[i]->buffer.data(), recvs[i]->buffer.size(), &recvs[i]->req);
    }
    (void)link.progress();
    link.close();
  }
  for (auto& r : recvs) {
    // A frame came for it: its payload, or (request-to-send) a header and a read of the peer.
    if (r->req.done && r->req.status.ok()) KOLO_FUZZ_CHECK(size >= 1 + 32);
  }
  return 0;
}
