// StoreClient: one connection, one request in flight at a time (a mutex serialises
// callers), every wait bounded by the caller's deadline. After a timeout or a lost
// connection the stream is out of step with the server, so it is closed for good and
// every later call says why.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "support/log.h"
#include "transport/bootstrap/store.h"
#include "transport/bootstrap/store_protocol.h"

namespace kolo {
namespace {

using store::Direction;
using store::FrameCodec;
using store::Nonce;
using store::Op;
using store::Reply;
using store::Request;

constexpr const char* kAuthHint = "authentication failed — is KOLO_SECRET the same on every rank?";
// How long a connection refused after a dropped handshake is retried before the store is
// taken for gone (connect_tcp retries a refused connection until its deadline).
constexpr double kGoneProbeSeconds = 0.05;
// A timed-out GATHER is not asked again with less than this left (gather_range).
constexpr double kLastAskSeconds = 0.05;

// Reads one whole frame (header first, so a bad length is refused before its body is
// read) and returns the authenticated body.
Result<std::string> read_frame(int fd, FrameCodec& codec, const Deadline& deadline) {
  std::string frame(store::kLengthBytes, '\0');
  KOLO_TRY(read_full(fd, frame.data(), frame.size(), deadline));
  Result<uint32_t> length = store::parse_frame_length(reinterpret_cast<const uint8_t*>(frame.data()));
  if (!length.ok()) return length.status();
  frame.resize(store::kLengthBytes + length.value() + store::kMacBytes);
  KOLO_TRY(read_full(fd, frame.data() + store::kLengthBytes, frame.size() - store::kLengthBytes, deadline));
  Result<std::optional<std::string>> body = codec.open(frame);
  if (!body.ok()) return body.status();
  if (!body.value()) return error(Code::kInternal, "store: whole frame read but not opened");
  return std::move(*body.value());
}

Status reply_status(const Reply& reply) {
  if (reply.code == Code::kOk) return Status();
  return Status(reply.code, str_cat("store server: ", reply.payload));
}

class StoreClientImpl final : public StoreClient {
 public:
  StoreClientImpl(Fd fd, FrameCodec codec, HostPort server, std::string local_ip)
      : fd_(std::move(fd)), codec_(std::move(codec)), server_(std::move(server)), local_ip_(std::move(local_ip)) {}

  Status set(const std::string& key, const std::string& value, const Deadline& deadline) override {
    Result<Reply> reply = call(Request{Op::kSet, {key}, value, 0}, deadline);
    if (!reply.ok()) return reply.status();
    return reply_status(reply.value());
  }

  Result<std::string> get(const std::string& key, const Deadline& deadline) override {
    Result<Reply> reply = call(Request{Op::kGet, {key}, "", 0}, deadline);
    if (!reply.ok()) return reply.status().with_context(str_cat("get '", key, "': "));
    KOLO_TRY(reply_status(reply.value()));
    return std::move(reply.value().payload);
  }

  Result<std::optional<std::string>> peek(const std::string& key, const Deadline& deadline) override {
    Result<Reply> reply = call(Request{Op::kPeek, {key}, "", 0}, deadline);
    if (!reply.ok()) return reply.status().with_context(str_cat("peek '", key, "': "));
    KOLO_TRY(reply_status(reply.value()));
    if (reply.value().number == 0) return std::optional<std::string>();
    return std::optional<std::string>(std::move(reply.value().payload));
  }

  Status set_owned(const std::string& key, const std::string& value, const Deadline& deadline) override {
    Result<Reply> reply = call(Request{Op::kSetOwned, {key}, value, 0}, deadline);
    if (!reply.ok()) return reply.status();
    return reply_status(reply.value());
  }

  Result<int64_t> add(const std::string& key, int64_t delta, const Deadline& deadline) override {
    Result<Reply> reply = call(Request{Op::kAdd, {key}, "", delta}, deadline);
    if (!reply.ok()) return reply.status();
    KOLO_TRY(reply_status(reply.value()));
    return reply.value().number;
  }

  Status wait(const std::vector<std::string>& keys, const Deadline& deadline) override {
    Result<Reply> reply = call(Request{Op::kWait, keys, "", 0}, deadline);
    if (!reply.ok()) return reply.status().with_context(str_cat("wait for ", keys.size(), " key(s): "));
    return reply_status(reply.value());
  }

  Result<std::vector<std::string>> gather_range(const std::string& prefix, int first, int count,
                                                const Deadline& deadline, std::vector<int>* missing) override {
    // The server gives up a little before this rank would, and says who is missing; asked
    // again while that leaves this rank time (the server's share of a short deadline is
    // half: a KOLO_TIMEOUT of 1 s failed a start-up whose rank 1 came half a second late).
    while (true) {
      const double left = deadline.remaining_seconds();
      std::vector<int> absent;
      auto gathered = gather_waiting(prefix, first, count, left > 1.0 ? left - 0.5 : left / 2, deadline, &absent);
      if (missing != nullptr) *missing = absent;
      // Only a timeout the server said (its list came whole) leaves the connection in step.
      if (gathered.ok() || absent.empty() || deadline.remaining_seconds() < kLastAskSeconds) return gathered;
    }
  }

  Result<std::vector<std::string>> gather_slice(const std::string& prefix, int count, double wait_s,
                                                const Deadline& deadline, std::vector<int>* missing) override {
    return gather_waiting(prefix, 0, count, std::min(wait_s, deadline.remaining_seconds() / 2), deadline, missing);
  }

  Result<std::vector<int>> absent(const std::string& prefix, int count, double wait_s,
                                  const Deadline& deadline) override {
    std::vector<int> missing;
    auto gathered = gather_slice(prefix, count, wait_s, deadline, &missing);
    if (!gathered.ok() && !(gathered.status().code() == Code::kTimeout && !missing.empty())) return gathered.status();
    return missing;
  }

  Result<std::vector<std::string>> gather_waiting(const std::string& prefix, int first, int count,
                                                  double server_wait, const Deadline& deadline,
                                                  std::vector<int>* missing) {
    Request request{Op::kGather, {prefix}, "", count};
    request.wait_ms = static_cast<int64_t>(std::max(0.0, server_wait) * 1e3);
    request.first = first;
    Result<Reply> reply = call(request, deadline);
    if (!reply.ok()) return reply.status().with_context(str_cat("gather of ", count, " keys '", prefix, "*': "));
    if (reply.value().code == Code::kTimeout) {
      std::vector<int> absent;
      const std::string& list = reply.value().payload;
      for (size_t at = 0; at < list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        // Indices of the keys asked for, or the reply is not the server's to trust: callers
        // index their members with them.
        const std::string text = list.substr(at, comma - at);
        char* end = nullptr;
        const long index = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || index < first || index >= static_cast<long>(first) + count) {
          return error(Code::kRemote, "store at ", server_.to_string(), ": GATHER timed out naming key '",
                       text.substr(0, 20), "', not one of ", first, "..", first + count - 1);
        }
        absent.push_back(static_cast<int>(index));
        at = comma + 1;
      }
      if (missing != nullptr) *missing = absent;
      return error(Code::kTimeout, "timed out with ", absent.size(), " of ", count, " keys '", prefix,
                   "*' missing (", list.substr(0, 200), list.size() > 200 ? ",..." : "", ")");
    }
    if (reply.value().code == Code::kOk && count > 0 && reply.value().payload.empty()) {
      return error(Code::kRemote, "store at ", server_.to_string(), ": empty GATHER reply");
    }
    KOLO_TRY(reply_status(reply.value()));
    auto values = store::parse_gathered(reply.value().payload, count);
    if (!values.ok()) return values.status().with_context(str_cat("store at ", server_.to_string(), ": "));
    return values;
  }

  // Each name is for one use: a second round under the same name would find the count
  // already past `count`.
  Status barrier(const std::string& name, int count, const Deadline& deadline) override {
    if (count <= 0) return error(Code::kInvalidArgument, "barrier '", name, "' with count ", count);
    Result<int64_t> arrived = add(name + "/count", 1, deadline);
    if (!arrived.ok()) return arrived.status().with_context(str_cat("barrier '", name, "': "));
    if (arrived.value() > count) {
      return error(Code::kInvalidUsage, "barrier '", name, "' entered by ", arrived.value(),
                   " callers but sized for ", count, " (barrier names must not be reused)");
    }
    if (arrived.value() == count) {
      Status s = set(name + "/done", "1", deadline);
      if (!s.ok()) return s.with_context(str_cat("barrier '", name, "': "));
    }
    Result<std::string> done = get(name + "/done", deadline);
    if (!done.ok()) {
      return done.status().with_context(
          str_cat("barrier '", name, "' (", arrived.value(), " of ", count, " arrived when this caller did): "));
    }
    return Status();
  }

  std::string local_ip() const override { return local_ip_; }

  // One request, one reply. Runs the HELLO at connect time too.
  Result<Reply> call(const Request& request, const Deadline& deadline) {
    // Encoding errors (a too-long key) are the caller's, and leave the connection usable.
    Result<std::string> body = store::encode_request(request);
    if (!body.ok()) return body.status();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fd_.valid()) {
      return error(Code::kRemote, "connection to the store at ", server_.to_string(), " is closed (", broken_, ")");
    }
    std::string frame = codec_.seal(body.value());
    Status s = write_full(fd_.get(), frame.data(), frame.size(), deadline);
    Result<std::string> reply_body = s.ok() ? read_frame(fd_.get(), codec_, deadline) : Result<std::string>(s);
    Result<Reply> reply = reply_body.ok() ? store::decode_reply(reply_body.value()) : reply_body.status();
    if (!reply.ok()) {
      const Status& failure = reply.status();
      broken_ = str_cat(store::op_name(request.op), " failed: ", failure.message());
      fd_.reset();
      return Status(failure.code(), str_cat("store at ", server_.to_string(), ": ", failure.message()));
    }
    return reply;
  }

 private:
  std::mutex mutex_;
  Fd fd_;
  FrameCodec codec_;
  const HostPort server_;
  const std::string local_ip_;
  std::string broken_;  // why fd_ was closed
};

// One connection attempt: the server's nonce, ours, HELLO, authenticated reply.
Result<std::unique_ptr<StoreClientImpl>> handshake(Fd fd, const HostPort& server, const std::string& secret,
                                                   const Deadline& deadline) {
  (void)set_nodelay(fd.get());
  Nonce nonce{};
  Status s = read_full(fd.get(), nonce.data(), nonce.size(), deadline);
  if (!s.ok()) return s.with_context("reading the store's challenge: ");
  Result<std::string> ip = local_address(fd.get());
  if (!ip.ok()) return ip.status();
  Nonce mine{};
  KOLO_TRY(random_bytes(mine.data(), mine.size()));
  s = write_full(fd.get(), mine.data(), mine.size(), deadline);
  if (!s.ok()) return s.with_context("sending this rank's nonce to the store: ");
  FrameCodec codec(secret, store::session_nonce(nonce, mine), Direction::kToServer);
  auto client = std::make_unique<StoreClientImpl>(std::move(fd), std::move(codec), server, ip.take());
  Result<Reply> reply = client->call(Request{Op::kHello, {}, std::string(store::kProtocolMagic), 0}, deadline);
  if (!reply.ok()) {
    // The server drops a connection whose HELLO fails its MAC, and a server with another
    // secret signs its reply with that secret: both mean the secrets differ.
    // Unless the server has gone: its rank exited (it failed, or gave up on this job) while
    // this rank was joining, and the connection closed with it. A store that is gone
    // refuses a new connection; one that refused this rank's secret takes it.
    if (reply.status().code() == Code::kRemote && !connect_tcp(server, Deadline(kGoneProbeSeconds)).ok()) {
      return error(Code::kRemote, "the store at ", server.to_string(),
                   " closed the connection while this rank joined and accepts no other: the rank that serves it "
                   "has exited, or stopped serving (", reply.status().message(), ")");
    }
    if (reply.status().code() == Code::kRemote) {
      return error(Code::kInvalidUsage, "store at ", server.to_string(), " refused this rank: ", kAuthHint,
                   " (", reply.status().message(), ")");
    }
    return reply.status();
  }
  KOLO_TRY(reply_status(reply.value()));
  return client;
}

}  // namespace

Result<std::unique_ptr<StoreClient>> StoreClient::connect(const HostPort& server, const std::string& secret,
                                                          const Deadline& deadline) {
  Result<Fd> fd = connect_tcp(server, deadline);
  if (!fd.ok()) {
    Code code = deadline.expired() ? Code::kTimeout : fd.status().code();
    return Status(code, str_cat("cannot reach the store at ", server.to_string(), ": ", fd.status().message()));
  }
  Result<std::unique_ptr<StoreClientImpl>> client = handshake(fd.take(), server, secret, deadline);
  if (!client.ok()) return client.status();
  log_trace(Subsys::kBootstrap, "connected to the store at ", server.to_string(), " from ",
            client.value()->local_ip());
  return std::unique_ptr<StoreClient>(client.take());
}

}  // namespace kolo
