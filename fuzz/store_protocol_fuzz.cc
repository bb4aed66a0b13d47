// libFuzzer target: the rendezvous store's wire protocol (transport/bootstrap/store_protocol.h)
// as the server and the client meet it.
//
// The input is used three ways:
//  - as one body: decode_request (what the server does with every frame) and decode_reply
//    (what a client does with every reply); whatever decodes must encode back to the same
//    bytes (the encoding is canonical);
//  - as a byte stream after the handshake, the way StoreServerImpl::process_input reads it:
//    the client's 32-byte nonce, then frames cut off by FrameCodec::open (length, body,
//    MAC), each body decoded as a request; delivered in pieces whose sizes come from the
//    input, in insecure mode (MACs unchecked, so the fuzzer reaches the decoder) and with a
//    secret (where every frame must fail its MAC unless the fuzzer forges HMAC-SHA256);
//  - the same stream seen by a client: frames towards the client, bodies decoded as replies.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "transport/bootstrap/store_protocol.h"

namespace {

using namespace kolo;
using namespace kolo::store;

void round_trip(std::string_view body) {
  Result<Request> request = decode_request(body);
  if (request.ok()) {
    Result<std::string> again = encode_request(request.value());
    KOLO_FUZZ_CHECK(again.ok());
    KOLO_FUZZ_CHECK(again.value() == body);
    (void)op_name(request.value().op);
  }
  Result<Reply> reply = decode_reply(body);
  if (reply.ok()) {
    Result<std::string> again = encode_reply(reply.value());
    KOLO_FUZZ_CHECK(again.ok());
    KOLO_FUZZ_CHECK(again.value() == body);
    // A GATHER reply's payload, read with the count the reply itself claims: whatever
    // parses must hold exactly that many values.
    Result<std::vector<std::string>> values = parse_gathered(reply.value().payload, reply.value().number);
    if (values.ok()) KOLO_FUZZ_CHECK(values.value().size() == static_cast<size_t>(reply.value().number));
  }
  // What one end seals, the other opens, byte for byte, and only once.
  if (!body.empty() && body.size() <= kMaxBodyBytes) {
    Nonce nonce{};
    FrameCodec client("fuzz-secret", nonce, Direction::kToServer);
    FrameCodec server("fuzz-secret", nonce, Direction::kToClient);
    std::string wire = client.seal(body);
    std::string replay = wire;
    Result<std::optional<std::string>> opened = server.open(wire);
    KOLO_FUZZ_CHECK(opened.ok() && opened.value() && *opened.value() == body && wire.empty());
    Result<std::optional<std::string>> again = server.open(replay);
    KOLO_FUZZ_CHECK(!again.ok());
  }
}

// Feeds `stream` to one end's codec in pieces, as a socket would deliver it.
void read_stream(std::string_view stream, const std::string& secret, Direction receiving, uint8_t piece_seed) {
  if (stream.size() < kNonceBytes) return;
  Nonce server{}, client{};
  for (size_t i = 0; i < kNonceBytes; ++i) server[i] = static_cast<uint8_t>(i);
  std::memcpy(client.data(), stream.data(), kNonceBytes);
  stream.remove_prefix(kNonceBytes);
  // The codec that receives in direction `receiving` sends the other way.
  Direction sending = receiving == Direction::kToServer ? Direction::kToClient : Direction::kToServer;
  FrameCodec codec(secret, session_nonce(server, client), sending);
  std::string in;
  size_t piece = 1 + piece_seed % 61;
  uint64_t frames = 0;
  while (!stream.empty() || !in.empty()) {
    size_t n = std::min(piece, stream.size());
    in.append(stream.substr(0, n));
    stream.remove_prefix(n);
    piece = piece * 7 % 61 + 1;
    while (true) {
      Result<std::optional<std::string>> frame = codec.open(in);
      if (!frame.ok()) return;  // the server rejects the connection
      if (!frame.value()) break;
      ++frames;
      KOLO_FUZZ_CHECK(!secret.empty() || codec.frames_opened() == frames);
      if (receiving == Direction::kToServer) {
        Result<Request> request = decode_request(*frame.value());
        if (!request.ok()) return;
      } else {
        Result<Reply> reply = decode_reply(*frame.value());
        if (!reply.ok()) return;
      }
    }
    if (n == 0) break;  // nothing more will come: an incomplete frame stays incomplete
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  round_trip(bytes);
  uint8_t seed = size > 0 ? data[size - 1] : 0;
  read_stream(bytes, "", Direction::kToServer, seed);
  read_stream(bytes, "", Direction::kToClient, seed);
  read_stream(bytes, "fuzz-secret", Direction::kToServer, seed);

  // A frame header alone, as the server checks it before buffering a body.
  if (size >= kLengthBytes) {
    Result<uint32_t> length = parse_frame_length(data);
    if (length.ok()) KOLO_FUZZ_CHECK(length.value() >= 1 && length.value() <= kMaxBodyBytes);
  }
  return 0;
}
