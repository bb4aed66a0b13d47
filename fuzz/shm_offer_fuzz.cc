// libFuzzer target: what the shared-memory transport reads from the store before it maps
// anything (transport/shm/shm_domain.h): the first rank's offer, "<socket name> <ranks>
// <slots> <slot_bytes> <ring_bytes>" (parse_offer), and each rank's announced process id
// (parse_pid). An offer that parses must describe a geometry the segment layout can hold
// (sizes that do not overflow, a power-of-two ring) and print back to itself.
//
// The shm link's frames travel through memory the ranks share, not bytes a parser reads;
// ShmLink needs a mapped Domain and is exercised by the unit tests instead.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "transport/shm/shm_domain.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kolo;
  using namespace kolo::shm;
  if (size == 0) return 0;
  // The first byte: how many ranks the reader expects (the domain's size).
  const int ranks = data[0] % (kMaxDomainRanks + 2);
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Result<Offer> offer = parse_offer(text, ranks);
  if (offer.ok()) {
    const SegmentGeometry& g = offer.value().geometry;
    KOLO_FUZZ_CHECK(!offer.value().name.empty());
    KOLO_FUZZ_CHECK(static_cast<int>(g.ranks) == ranks);
    KOLO_FUZZ_CHECK(g.slots >= 3 && g.ring_bytes >= 4096 && (g.ring_bytes & (g.ring_bytes - 1)) == 0);
    // The layout in 64-bit arithmetic: every offset is below the total, and the total is
    // what a 64-bit size_t can map.
    const unsigned __int128 staging = static_cast<unsigned __int128>(g.slot_bytes) * g.slots * g.ranks;
    const unsigned __int128 rings = static_cast<unsigned __int128>(g.channel_stride()) * g.ranks * g.ranks;
    KOLO_FUZZ_CHECK(staging + rings < (static_cast<unsigned __int128>(1) << 63));
    KOLO_FUZZ_CHECK(g.staging_offset() < g.channel_offset() || g.slot_bytes * g.slots * g.ranks == 0);
    KOLO_FUZZ_CHECK(g.channel_offset() <= g.total_bytes());
    Result<Offer> again = parse_offer(offer_text(offer.value()), ranks);
    KOLO_FUZZ_CHECK(again.ok());
    KOLO_FUZZ_CHECK(again.value().name == offer.value().name);
    KOLO_FUZZ_CHECK(again.value().geometry.slots == g.slots && again.value().geometry.slot_bytes == g.slot_bytes &&
                    again.value().geometry.ring_bytes == g.ring_bytes);
  }
  Result<pid_t> pid = parse_pid(text);
  if (pid.ok()) KOLO_FUZZ_CHECK(pid.value() > 0);
  return 0;
}
