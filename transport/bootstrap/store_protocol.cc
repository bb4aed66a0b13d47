#include "transport/bootstrap/store_protocol.h"

#include <cstring>
#include <utility>

namespace kolo::store {
namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i) & 0xff));
}

uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, static_cast<uint32_t>(bytes.size()));
  out.append(bytes);
}

// Reads fields from an untrusted body. The first failure sticks and later reads return
// empty values, so a decoder reads straight through and checks once at the end.
class BodyReader {
 public:
  explicit BodyReader(std::string_view body) : body_(body) {}

  std::string bytes(size_t limit, const char* what) {
    if (!status_.ok()) return {};
    if (left() < 4) {
      status_ = error(Code::kRemote, "truncated store message: no room for the length of the ", what);
      return {};
    }
    uint32_t size = get_u32(at());
    pos_ += 4;
    if (size > limit) {
      status_ = error(Code::kRemote, "store message has a ", what, " of ", size, " bytes (limit ", limit, ")");
      return {};
    }
    if (size > left()) {
      status_ = error(Code::kRemote, "truncated store message: ", what, " of ", size, " bytes but only ",
                      left(), " left");
      return {};
    }
    std::string out(body_.substr(pos_, size));
    pos_ += size;
    return out;
  }

  int64_t i64(const char* what) {
    if (!status_.ok()) return 0;
    if (left() < 8) {
      status_ = error(Code::kRemote, "truncated store message: no room for the ", what);
      return 0;
    }
    uint64_t v = get_u64(at());
    pos_ += 8;
    return static_cast<int64_t>(v);
  }

  size_t left() const { return body_.size() - pos_; }

  void fail(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }

  // The final check: no failure and nothing left over.
  Status finish(const char* message) {
    if (status_.ok() && left() != 0) {
      status_ = error(Code::kRemote, "store ", message, " message has ", left(), " trailing bytes");
    }
    return status_;
  }

 private:
  const uint8_t* at() const { return reinterpret_cast<const uint8_t*>(body_.data()) + pos_; }

  std::string_view body_;
  size_t pos_ = 0;
  Status status_;
};

Status check_key(const std::string& key) {
  if (key.size() > kStoreMaxKeyBytes) {
    return error(Code::kInvalidArgument, "store key of ", key.size(), " bytes exceeds the limit of ",
                 kStoreMaxKeyBytes, " (key starts '", key.substr(0, 40), "')");
  }
  return Status();
}

size_t keys_expected(Op op) {
  switch (op) {
    case Op::kSet:
    case Op::kGet:
    case Op::kAdd:
    case Op::kPeek:
    case Op::kSetOwned:
    case Op::kGather: return 1;
    default: return 0;
  }
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::kHello: return "HELLO";
    case Op::kSet: return "SET";
    case Op::kGet: return "GET";
    case Op::kAdd: return "ADD";
    case Op::kWait: return "WAIT";
    case Op::kReply: return "REPLY";
    case Op::kPeek: return "PEEK";
    case Op::kSetOwned: return "SET_OWNED";
    case Op::kGather: return "GATHER";
  }
  return "?";
}

Result<std::string> encode_request(const Request& request) {
  if (request.op < Op::kHello || request.op > Op::kGather || request.op == Op::kReply) {
    return error(Code::kInternal, "not a store request op: ", static_cast<int>(request.op));
  }
  if (request.op != Op::kWait && request.keys.size() != keys_expected(request.op)) {
    return error(Code::kInternal, "store ", op_name(request.op), " takes ", keys_expected(request.op),
                 " key(s), not ", request.keys.size());
  }
  for (const std::string& key : request.keys) KOLO_TRY(check_key(key));
  if (request.value.size() > kStoreMaxValueBytes) {
    return error(Code::kInvalidArgument, "store value of ", request.value.size(),
                 " bytes exceeds the limit of ", kStoreMaxValueBytes);
  }
  std::string body;
  body.push_back(static_cast<char>(request.op));
  switch (request.op) {
    case Op::kHello: put_bytes(body, request.value); break;
    case Op::kSet:
    case Op::kSetOwned:
      put_bytes(body, request.keys[0]);
      put_bytes(body, request.value);
      break;
    case Op::kGet:
    case Op::kPeek: put_bytes(body, request.keys[0]); break;
    case Op::kAdd:
    case Op::kGather:
      if (request.op == Op::kGather && (request.number < 0 || request.number > kMaxGatherKeys)) {
        return error(Code::kInvalidArgument, "store GATHER of ", request.number, " keys (at most ", kMaxGatherKeys, ")");
      }
      put_bytes(body, request.keys[0]);
      put_u64(body, static_cast<uint64_t>(request.number));
      if (request.op == Op::kGather) {
        if (request.wait_ms < 0 || request.first < 0 || request.first > kMaxGatherKeys) {
          return error(Code::kInvalidArgument, "store GATHER from key ", request.first, " waiting ", request.wait_ms, " ms");
        }
        put_u64(body, static_cast<uint64_t>(request.wait_ms));
        put_u64(body, static_cast<uint64_t>(request.first));
      }
      break;
    case Op::kWait:
      put_u64(body, request.keys.size());
      for (const std::string& key : request.keys) put_bytes(body, key);
      break;
    case Op::kReply: break;
  }
  if (body.size() > kMaxBodyBytes) {
    return error(Code::kInvalidArgument, "store ", op_name(request.op), " message of ", body.size(),
                 " bytes exceeds the limit of ", kMaxBodyBytes, " (too many keys?)");
  }
  return body;
}

Result<Request> decode_request(std::string_view body) {
  if (body.empty()) return error(Code::kRemote, "empty store message");
  if (body.size() > kMaxBodyBytes) {
    return error(Code::kRemote, "store message of ", body.size(), " bytes exceeds the limit");
  }
  Request request;
  request.op = static_cast<Op>(static_cast<uint8_t>(body[0]));
  BodyReader reader(body.substr(1));
  switch (request.op) {
    case Op::kHello: request.value = reader.bytes(kStoreMaxKeyBytes, "protocol magic"); break;
    case Op::kSet:
    case Op::kSetOwned:
      request.keys.push_back(reader.bytes(kStoreMaxKeyBytes, "key"));
      request.value = reader.bytes(kStoreMaxValueBytes, "value");
      break;
    case Op::kGet:
    case Op::kPeek: request.keys.push_back(reader.bytes(kStoreMaxKeyBytes, "key")); break;
    case Op::kAdd:
      request.keys.push_back(reader.bytes(kStoreMaxKeyBytes, "key"));
      request.number = reader.i64("delta");
      break;
    case Op::kGather:
      request.keys.push_back(reader.bytes(kStoreMaxKeyBytes, "key prefix"));
      request.number = reader.i64("key count");
      request.wait_ms = reader.i64("wait");
      request.first = reader.i64("first key");
      if (request.wait_ms < 0 || request.first < 0 || request.first > kMaxGatherKeys) {
        reader.fail(error(Code::kRemote, "store GATHER message from key ", request.first, " waits ", request.wait_ms, " ms"));
      }
      if (request.number < 0 || request.number > kMaxGatherKeys) {
        reader.fail(error(Code::kRemote, "store GATHER message asks for ", request.number, " keys (at most ",
                          kMaxGatherKeys, ")"));
      }
      break;
    case Op::kWait: {
      int64_t count = reader.i64("key count");
      // Each key takes at least its 4-byte length, which bounds an honest count by what
      // is left; a larger count is a lie and must not size anything.
      if (count < 0 || static_cast<uint64_t>(count) > reader.left() / 4) {
        reader.fail(error(Code::kRemote, "store WAIT message claims ", count, " keys in ", reader.left(),
                          " bytes"));
        break;
      }
      for (int64_t i = 0; i < count; ++i) request.keys.push_back(reader.bytes(kStoreMaxKeyBytes, "key"));
      break;
    }
    default:
      return error(Code::kRemote, "unknown store request op ", static_cast<int>(static_cast<uint8_t>(body[0])));
  }
  KOLO_TRY(reader.finish(op_name(request.op)));
  return request;
}

Result<std::string> encode_reply(const Reply& reply) {
  if (reply.payload.size() > kStoreMaxValueBytes) {
    return error(Code::kInvalidArgument, "store reply of ", reply.payload.size(), " bytes exceeds the limit");
  }
  std::string body;
  body.push_back(static_cast<char>(Op::kReply));
  put_u64(body, static_cast<uint64_t>(static_cast<int64_t>(reply.code)));
  put_bytes(body, reply.payload);
  put_u64(body, static_cast<uint64_t>(reply.number));
  return body;
}

Result<Reply> decode_reply(std::string_view body) {
  if (body.empty()) return error(Code::kRemote, "empty store reply");
  if (body.size() > kMaxBodyBytes) return error(Code::kRemote, "store reply of ", body.size(), " bytes");
  if (static_cast<Op>(static_cast<uint8_t>(body[0])) != Op::kReply) {
    return error(Code::kRemote, "store reply has op ", static_cast<int>(static_cast<uint8_t>(body[0])),
                 ", expected REPLY");
  }
  BodyReader reader(body.substr(1));
  Reply reply;
  int64_t code = reader.i64("status code");
  if (code < 0 || code > static_cast<int64_t>(Code::kInternal)) {
    reader.fail(error(Code::kRemote, "store reply has unknown status code ", code));
  }
  reply.code = static_cast<Code>(code);
  reply.payload = reader.bytes(kStoreMaxValueBytes, "payload");
  reply.number = reader.i64("number");
  KOLO_TRY(reader.finish("REPLY"));
  return reply;
}

Result<uint32_t> parse_frame_length(const uint8_t header[kLengthBytes]) {
  uint32_t length = get_u32(header);
  if (length == 0 || length > kMaxBodyBytes) {
    return error(Code::kRemote, "frame length ", length, " outside [1, ", kMaxBodyBytes, "]");
  }
  return length;
}

Nonce session_nonce(const Nonce& server, const Nonce& client) {
  std::string both(reinterpret_cast<const char*>(server.data()), server.size());
  both.append(reinterpret_cast<const char*>(client.data()), client.size());
  Mac mac = hmac_sha256("kolo-store/session", both.data(), both.size());  // a hash; no secret needed here
  Nonce session{};
  static_assert(sizeof(session) == sizeof(mac));
  std::memcpy(session.data(), mac.data(), session.size());
  return session;
}

Mac frame_mac(const std::string& secret, const Nonce& nonce, Direction direction, uint64_t sequence,
              std::string_view body) {
  Mac mac{};
  if (secret.empty()) return mac;
  std::string input;
  input.reserve(kNonceBytes + 1 + 8 + 4 + body.size());
  input.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  input.push_back(static_cast<char>(direction));
  put_u64(input, sequence);
  put_u32(input, static_cast<uint32_t>(body.size()));
  input.append(body);
  return hmac_sha256(secret, input.data(), input.size());
}

FrameCodec::FrameCodec(std::string secret, const Nonce& nonce, Direction send_direction)
    : secret_(std::move(secret)),
      nonce_(nonce),
      send_direction_(send_direction),
      recv_direction_(send_direction == Direction::kToServer ? Direction::kToClient : Direction::kToServer) {}

std::string FrameCodec::seal(std::string_view body) {
  std::string frame;
  frame.reserve(kLengthBytes + body.size() + kMacBytes);
  put_u32(frame, static_cast<uint32_t>(body.size()));
  frame.append(body);
  Mac mac = frame_mac(secret_, nonce_, send_direction_, send_sequence_++, body);
  frame.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return frame;
}

Result<std::optional<std::string>> FrameCodec::open(std::string& in) {
  if (in.size() < kLengthBytes) return std::optional<std::string>();
  Result<uint32_t> length = parse_frame_length(reinterpret_cast<const uint8_t*>(in.data()));
  if (!length.ok()) return length.status();
  size_t total = kLengthBytes + length.value() + kMacBytes;
  if (in.size() < total) return std::optional<std::string>();
  std::string body = in.substr(kLengthBytes, length.value());
  if (!secret_.empty()) {
    Mac expected = frame_mac(secret_, nonce_, recv_direction_, recv_sequence_, body);
    Mac got;
    std::memcpy(got.data(), in.data() + kLengthBytes + length.value(), kMacBytes);
    if (!mac_equal(expected, got)) {
      return error(Code::kRemote, "frame ", recv_sequence_,
                   " failed authentication (wrong secret, forged, replayed or reordered)");
    }
  }
  ++recv_sequence_;
  in.erase(0, total);
  return std::optional<std::string>(std::move(body));
}

void append_gathered(std::string& payload, std::string_view value) { put_bytes(payload, value); }

Result<std::vector<std::string>> parse_gathered(std::string_view payload, int64_t count) {
  BodyReader reader(payload);
  std::vector<std::string> values;
  // Each value takes at least its 4-byte length: a count the payload cannot hold is refused
  // before anything is sized by it.
  if (count < 0 || static_cast<uint64_t>(count) > payload.size() / 4) {
    return error(Code::kRemote, "store GATHER reply of ", payload.size(), " bytes cannot hold ", count, " values");
  }
  values.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values.push_back(reader.bytes(kStoreMaxValueBytes, "gathered value"));
  KOLO_TRY(reader.finish("GATHER reply"));
  return values;
}

}  // namespace kolo::store
