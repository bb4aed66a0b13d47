// The rendezvous store's wire protocol, as pure functions over bytes so that every rule
// (lengths, MACs, sequence numbers) is testable without sockets.
//
// On accept the server sends a 32-byte random nonce, and the client answers with its own.
// After that every message, in both directions, is one frame:
//
//   u32 body length (LE) | body | 32-byte HMAC-SHA256(secret,
//                                   session | direction | u64 sequence (LE) | u32 length | body)
//
// where session = session_nonce(server nonce, client nonce). Sequence numbers count from 0
// per direction, so a replayed, reordered or reflected frame fails its MAC; the session mixes
// both ends' nonces, so neither end can bring back a recorded session on its own. An empty secret is insecure mode: the MAC field is all zeros and unchecked.
//
// A body is an op byte followed by fields, each either a byte string (u32 length LE, bytes)
// or an int64 (8 bytes LE). No trailing bytes are allowed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/crypto.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"

namespace kolo::store {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
constexpr size_t kLengthBytes = 4;
// Largest body: a SET of the largest key and value plus the op and field headers.
constexpr size_t kMaxBodyBytes = kStoreMaxValueBytes + kStoreMaxKeyBytes + 64;
constexpr size_t kMaxFrameBytes = kLengthBytes + kMaxBodyBytes + kMacBytes;
// Sent in HELLO so that two builds with incompatible protocols fail clearly.
// 2: the client sends a nonce too; 3: PEEK and SET_OWNED (elastic jobs' liveness);
// 4: GATHER (a communicator's start-up exchanges, one request per rank).
constexpr std::string_view kProtocolMagic = "kolo-store/4";
// Most keys one GATHER may ask for (its reply must also fit kStoreMaxValueBytes).
constexpr int64_t kMaxGatherKeys = 1 << 20;

using Nonce = std::array<uint8_t, kNonceBytes>;

// Bound into every MAC so that a frame cannot be reflected back to its sender.
enum class Direction : uint8_t { kToServer = 1, kToClient = 2 };

enum class Op : uint8_t {
  kHello = 1,  // magic                       -> ok
  kSet = 2,    // key, value                  -> ok
  kGet = 3,    // key                         -> value (parked until the key exists)
  kAdd = 4,    // key, int64 delta            -> number = new value
  kWait = 5,   // int64 count, count x key    -> ok (parked until all exist)
  kReply = 6,  // int64 code, payload, int64 number (server to client only)
  kPeek = 7,   // key                         -> number = 1 and value if it exists, else 0 (never parked)
  kSetOwned = 8,  // key, value               -> ok; the key is erased when this connection closes
  kGather = 9,    // prefix, int64 count, int64 wait_ms, int64 first
                  //   -> the values of prefix+first .. prefix+(first+count-1), each as a byte string, in
                  //      order (parked until all exist); after wait_ms, TIMEOUT with the indices
                  //      still missing, comma-separated, as its payload (so the caller can name them)
};

struct Request {
  Op op = Op::kHello;
  std::vector<std::string> keys;  // one for SET/GET/ADD/PEEK/SET_OWNED/GATHER, any number for WAIT, none for HELLO
  std::string value;              // SET value; HELLO magic
  int64_t number = 0;             // ADD delta; GATHER count
  int64_t wait_ms = 0;            // GATHER: how long the server waits before answering TIMEOUT
  int64_t first = 0;              // GATHER: the first key's number
};

struct Reply {
  Code code = Code::kOk;
  std::string payload;  // GET value, or the error message when code != kOk
  int64_t number = 0;   // ADD result
};

// The nonce every frame's MAC is bound to, from both ends' random nonces. With the server's
// nonce alone (protocol 1), whoever had recorded one session could play the server to a
// client under the same secret: send the recorded nonce, then the recorded replies (stale
// addresses). The client's nonce makes every session's MACs new for both ends.
Nonce session_nonce(const Nonce& server, const Nonce& client);

// Encoders check the same limits as the decoders, so a client learns about a too-long key
// before it reaches the wire (kInvalidArgument).
Result<std::string> encode_request(const Request& request);
Result<Request> decode_request(std::string_view body);
Result<std::string> encode_reply(const Reply& reply);
Result<Reply> decode_reply(std::string_view body);

// Reads the frame header; rejects a length outside [1, kMaxBodyBytes] before anything of
// that size is allocated.
Result<uint32_t> parse_frame_length(const uint8_t header[kLengthBytes]);

// The MAC of one frame; all zeros when the secret is empty.
Mac frame_mac(const std::string& secret, const Nonce& nonce, Direction direction, uint64_t sequence,
              std::string_view body);

// One end of a connection: seals outgoing frames and opens incoming ones, keeping the two
// sequence numbers.
class FrameCodec {
 public:
  FrameCodec(std::string secret, const Nonce& nonce, Direction send_direction);

  // Length, body and MAC, ready to write; advances the send sequence number.
  std::string seal(std::string_view body);
  // Cuts one frame off the front of `in`: the body when a whole authentic frame is there,
  // nullopt when more bytes are needed, an error (kRemote) for a bad length or MAC. After
  // an error the connection must be dropped: the codec's state is no longer meaningful.
  Result<std::optional<std::string>> open(std::string& in);

  bool insecure() const { return secret_.empty(); }
  uint64_t frames_opened() const { return recv_sequence_; }

 private:
  std::string secret_;
  Nonce nonce_;
  Direction send_direction_;
  Direction recv_direction_;
  uint64_t send_sequence_ = 0;
  uint64_t recv_sequence_ = 0;
};

const char* op_name(Op op);

// A GATHER reply's payload: the values, each as a byte string, in key order; and back,
// checking that exactly `count` values and nothing else are there.
void append_gathered(std::string& payload, std::string_view value);
Result<std::vector<std::string>> parse_gathered(std::string_view payload, int64_t count);

}  // namespace kolo::store
