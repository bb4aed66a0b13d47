// libFuzzer target: the runtime's negotiation messages (engine/runtime/message.h), which
// travel between processes: what a rank sends the coordinator (RankMessage: joined, the
// requests with their names and Signatures, the stall inspector's pending ages) and the
// coordinator's answer (ResponseList). The input is decoded as both; whatever decodes
// must encode to bytes that decode to the same message and encode the same again.
// Then the input is cut into one message per rank (byte 0: the number of ranks, 1 to 4;
// then per rank a 16-bit length and the message) and the messages that decode go to the
// coordinator (Coordinator::handle, two cycles): what it does with every rank's names and
// signatures, and its answer, which must decode again.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/runtime/coordinator.h"
#include "engine/runtime/message.h"
#include "fuzz/fuzz_check.h"

namespace {

using namespace kolo;
using namespace kolo::runtime;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same(const Signature& a, const Signature& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.op == b.op && a.root == b.root &&
         same_bits(a.prescale, b.prescale) && same_bits(a.postscale, b.postscale) && a.wire == b.wire &&
         a.device == b.device && a.counts == b.counts;
}

void rank_message(const uint8_t* data, size_t size) {
  RankMessage message;
  if (!decode(data, size, 3, message).ok()) return;
  std::vector<uint8_t> bytes = encode(message);
  KOLO_FUZZ_CHECK(bytes.size() <= size);  // decode ignores trailing bytes, never invents
  RankMessage again;
  KOLO_FUZZ_CHECK(decode(bytes.data(), bytes.size(), 3, again).ok());
  KOLO_FUZZ_CHECK(again.joined == message.joined && again.requests.size() == message.requests.size() &&
                  again.pending.size() == message.pending.size());
  for (size_t i = 0; i < message.requests.size(); ++i) {
    KOLO_FUZZ_CHECK(again.requests[i].name == message.requests[i].name);
    KOLO_FUZZ_CHECK(same(again.requests[i].sig, message.requests[i].sig));
    KOLO_FUZZ_CHECK(again.requests[i].local == message.requests[i].local);
    (void)message.requests[i].sig.total_count();
  }
  KOLO_FUZZ_CHECK(encode(again) == bytes);
}

void response_list(const uint8_t* data, size_t size) {
  ResponseList list;
  if (!decode(data, size, list).ok()) return;
  std::vector<uint8_t> bytes = encode(list);
  KOLO_FUZZ_CHECK(bytes.size() <= size);
  ResponseList again;
  KOLO_FUZZ_CHECK(decode(bytes.data(), bytes.size(), again).ok());
  KOLO_FUZZ_CHECK(again.responses.size() == list.responses.size() && again.shutdown_code == list.shutdown_code &&
                  again.shutdown_message == list.shutdown_message);
  for (size_t i = 0; i < list.responses.size(); ++i) {
    const Response& a = list.responses[i];
    const Response& b = again.responses[i];
    KOLO_FUZZ_CHECK(a.name == b.name && same(a.sig, b.sig) && a.locals == b.locals && a.code == b.code &&
                    a.message == b.message);
  }
  // The coordinator compares every rank's signature with the first one's.
  for (size_t i = 1; i < list.responses.size(); ++i) {
    std::string x, y;
    (void)Signature::difference(list.responses[0].sig, list.responses[i].sig, &x, &y);
  }
  KOLO_FUZZ_CHECK(encode(again) == bytes);
}

void coordinate(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int ranks = 1 + data[0] % 4;
  size_t at = 1;
  std::vector<RankMessage> messages(ranks);
  for (int r = 0; r < ranks; ++r) {
    if (size - at < 2) return;
    size_t n = std::min<size_t>(data[at] | data[at + 1] << 8, size - at - 2);
    at += 2;
    if (!decode(data + at, n, r, messages[r]).ok()) return;
    at += n;
  }
  Coordinator coordinator(ranks);
  StallSettings stall;
  stall.check_seconds = 1;
  for (int cycle = 0; cycle < 2; ++cycle) {
    ResponseList list = coordinator.handle(messages, stall);
    std::vector<uint8_t> bytes = encode(list);
    ResponseList again;
    KOLO_FUZZ_CHECK(decode(bytes.data(), bytes.size(), again).ok());
    KOLO_FUZZ_CHECK(again.responses.size() == list.responses.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rank_message(data, size);
  response_list(data, size);
  coordinate(data, size);
  return 0;
}
