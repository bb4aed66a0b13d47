// StoreServer: one thread, one poll() loop over the listening socket, a stop eventfd and
// every client. Nothing in the loop blocks: reads and writes are non-blocking with
// per-connection buffers, and GET/WAIT requests for missing keys are parked and answered
// when a SET or ADD creates the key. A client that sends half a frame, or stops reading,
// only ever delays itself.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "support/crypto.h"
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

constexpr size_t kReadChunk = 64u << 10;
// Above this much unsent output a connection's requests wait: a client that never reads
// its replies cannot make the server buffer without bound.
constexpr size_t kOutputHighWater = 1u << 20;
// Clients send HELLO right after the nonce; a connection that has not authenticated by
// then is a stray or an attacker holding a slot.
constexpr double kHandshakeSeconds = 30.0;

std::string format_address(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return str_cat(text, ":", ntohs(in->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return str_cat("[", text, "]:", ntohs(in6->sin6_port));
  }
  return "unknown peer";
}

struct Conn {
  Conn(uint64_t id_in, Fd fd_in, std::string peer_in, const std::string& secret, const Nonce& nonce)
      : id(id_in),
        fd(std::move(fd_in)),
        peer(std::move(peer_in)),
        server_nonce(nonce),
        codec(secret, nonce, Direction::kToClient),  // replaced once the client's nonce is in
        accepted_at(now_seconds()) {}

  size_t pending_output() const { return out.size() - out_sent; }

  uint64_t id;
  Fd fd;
  std::string peer;
  Nonce server_nonce;
  bool have_client_nonce = false;
  FrameCodec codec;
  double accepted_at;
  std::string in;
  std::string out;
  size_t out_sent = 0;
  bool authenticated = false;  // a valid HELLO has arrived
  bool closed = false;         // erased at the end of the loop iteration
  // A GET or WAIT waiting for keys; while set, later frames stay buffered so that
  // replies go out in request order.
  std::optional<Request> parked;
  std::string parked_on;  // the missing key under which it is registered in waiters_
  // Keys of the parked request known to exist (they are never erased while it waits but
  // for owned keys, which are checked again when answering): a WAIT or GATHER of N keys
  // woken N times scans each key once, not N times.
  int64_t parked_next = 0;
  double parked_until = 0;  // a GATHER answers TIMEOUT then (0: waits for ever)
};

class StoreServerImpl final : public StoreServer {
 public:
  StoreServerImpl(Fd listen_fd, Fd wake_fd, std::string secret, uint16_t port)
      : secret_(std::move(secret)), port_(port), listen_fd_(std::move(listen_fd)), wake_fd_(std::move(wake_fd)) {}

  ~StoreServerImpl() override;

  // Ends the server thread (once; later calls return at once).
  void stop_thread() {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    if (!thread_.joinable()) return;
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof(one));
    (void)ignored;
    thread_.join();
  }

  uint16_t port() const override { return port_; }
  pid_t owner_pid() const { return owner_pid_; }
  uint64_t rejected_connections() const override { return rejected_.load(); }

  Status start_thread() {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
      return error(Code::kSystem, "store: cannot start the server thread: ", e.what());
    }
    return Status();
  }

 private:
  void run();
  void accept_all();
  void read_input(Conn& c);
  bool process_input(Conn& c);
  int poll_ms() const;
  void expire_gathers();
  void handle(Conn& c, Request request);
  bool try_answer(Conn& c);
  void key_changed(const std::string& key);
  void send_reply(Conn& c, const Reply& reply);
  void flush(Conn& c);
  void reject(Conn& c, const std::string& reason);
  void close_conn(Conn& c, const std::string& reason);
  void unregister_waiter(Conn& c);
  void erase_owned(Conn& c);
  void sweep();

  const std::string secret_;
  const uint16_t port_;
  Fd listen_fd_;
  Fd wake_fd_;
  std::atomic<uint64_t> rejected_{0};

  // Everything below belongs to the server thread.
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 1;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // missing key -> conn ids
  std::unordered_map<std::string, uint64_t> owner_;  // SET_OWNED key -> the conn whose close erases it
  double accept_paused_until_ = 0;
  char chunk_[kReadChunk];
  std::mutex stop_mutex_;
  const pid_t owner_pid_ = ::getpid();  // the process whose thread serves
  std::thread thread_;
};

// The servers whose threads may still run. A process can exit while its server answers a
// peer (a rank returning from main without destroying its communicator, while the others
// finish): OpenSSL frees its state in an exit handler, and the server's next HMAC crashed.
// So an exit handler registered after OpenSSL's (exit handlers run last registered first)
// ends every server thread before that. Never destroyed: exit handlers use them.
std::mutex& g_live_mutex = *new std::mutex;
std::set<StoreServerImpl*>& g_live = *new std::set<StoreServerImpl*>;

void stop_live_servers() {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  // A forked child inherits the list, not the threads (nor may it stop the parent's).
  for (StoreServerImpl* server : g_live) {
    if (server->owner_pid() == ::getpid()) server->stop_thread();
  }
}

void add_live_server(StoreServerImpl* server) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  static const bool registered = [] {
    // OpenSSL registers its exit handler at its first use (OPENSSL_init_crypto with no
    // options does nothing): an HMAC now puts it before ours, so that ours runs first.
    const char byte = 0;
    (void)hmac_sha256(std::string("kolo"), &byte, 1);
    return std::atexit(stop_live_servers) == 0;
  }();
  (void)registered;
  g_live.insert(server);
}

StoreServerImpl::~StoreServerImpl() {
  {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    g_live.erase(this);
  }
  stop_thread();
  // Reverse order of acquisition: clients, then the wake-up channel, then the port.
  waiters_.clear();
  conns_.clear();
  wake_fd_.reset();
  listen_fd_.reset();
}

void StoreServerImpl::run() {
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;
  while (true) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_fd_.get(), POLLIN, 0});
    // A negative fd makes poll() skip the entry: accepting pauses after EMFILE.
    fds.push_back({now_seconds() >= accept_paused_until_ ? listen_fd_.get() : -1, POLLIN, 0});
    for (auto& [id, c] : conns_) {
      short events = POLLRDHUP;
      if (c->in.size() < store::kMaxFrameBytes) events |= POLLIN;
      if (c->pending_output() > 0) events |= POLLOUT;
      fds.push_back({c->fd.get(), events, 0});
      polled.push_back(c.get());
    }
    int ready = ::poll(fds.data(), fds.size(), poll_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;
      log_warn(Subsys::kBootstrap, "store: poll failed (", std::strerror(errno), "); server stops");
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) accept_all();
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn& c = *polled[i];
      short revents = fds[i + 2].revents;
      if (c.closed || revents == 0) continue;
      if (revents & (POLLERR | POLLNVAL)) {
        close_conn(c, "socket error");
        continue;
      }
      if (revents & POLLOUT) flush(c);
      if (c.closed) continue;
      if (revents & POLLIN) {
        read_input(c);
      } else if (revents & (POLLHUP | POLLRDHUP)) {
        // Not reading (input buffer full) and the peer is gone.
        close_conn(c, "closed by peer");
      }
    }
    // Run buffered requests until nothing moves: a SET may unpark a connection whose
    // next frames are already here, and poll() would not report them again.
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& [id, c] : conns_) progress = process_input(*c) || progress;
    }
    expire_gathers();
    double now = now_seconds();
    for (auto& [id, c] : conns_) {
      if (!c->closed && !c->authenticated && now - c->accepted_at > kHandshakeSeconds) {
        reject(*c, str_cat("no authenticated HELLO within ", kHandshakeSeconds, " s"));
      }
    }
    sweep();
  }
  // Close every client now so that their pending calls fail at once, not at their deadline.
  waiters_.clear();
  conns_.clear();
}

void StoreServerImpl::accept_all() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors or memory: the listening socket stays readable, so back off
      // instead of spinning.
      log_warn(Subsys::kBootstrap, "store: accept failed (", std::strerror(errno), "); pausing for 100 ms");
      accept_paused_until_ = now_seconds() + 0.1;
      return;
    }
    Fd owned(fd);
    std::string peer = format_address(addr);
    Nonce nonce{};
    Status s = random_bytes(nonce.data(), nonce.size());
    if (!s.ok()) {
      log_warn(Subsys::kBootstrap, "store: refusing ", peer, ": ", s.to_string());
      continue;
    }
    (void)set_nodelay(owned.get());
    uint64_t id = next_id_++;
    auto conn = std::make_unique<Conn>(id, std::move(owned), peer, secret_, nonce);
    conn->out.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
    log_trace(Subsys::kBootstrap, "store: connection ", id, " from ", peer);
    flush(*conn);
    conns_.emplace(id, std::move(conn));
  }
}

void StoreServerImpl::read_input(Conn& c) {
  // One chunk per wake-up: the frame header is checked before more than a chunk of a
  // frame is buffered, and one busy client cannot starve the others.
  size_t want = std::min(kReadChunk, store::kMaxFrameBytes - c.in.size());
  while (true) {
    ssize_t n = ::recv(c.fd.get(), chunk_, want, MSG_DONTWAIT);
    if (n > 0) {
      c.in.append(chunk_, static_cast<size_t>(n));
      return;
    }
    if (n == 0) {
      close_conn(c, "closed by peer");
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) close_conn(c, str_cat("receive failed: ", std::strerror(errno)));
    return;
  }
}

bool StoreServerImpl::process_input(Conn& c) {
  if (c.closed) return false;
  if (!c.have_client_nonce) {  // the client's nonce comes first, before any frame
    if (c.in.size() < store::kNonceBytes) return false;
    Nonce client{};
    std::memcpy(client.data(), c.in.data(), client.size());
    c.in.erase(0, client.size());
    c.codec = FrameCodec(secret_, store::session_nonce(c.server_nonce, client), Direction::kToClient);
    c.have_client_nonce = true;
  }
  bool progress = false;
  while (!c.closed && !c.parked && c.pending_output() <= kOutputHighWater) {
    Result<std::optional<std::string>> frame = c.codec.open(c.in);
    if (!frame.ok()) {
      // A bad MAC on the first frame is almost always a mismatched secret, so say so.
      bool first = c.codec.frames_opened() == 0 &&
                   frame.status().message().find("authentication") != std::string::npos;
      reject(c, frame.status().message() +
                    (first && !secret_.empty() ? " — is KOLO_SECRET the same on every rank?" : ""));
      break;
    }
    if (!frame.value()) break;
    Result<Request> request = store::decode_request(*frame.value());
    if (!request.ok()) {
      reject(c, request.status().message());
      break;
    }
    progress = true;
    handle(c, request.take());
  }
  if (!c.closed) flush(c);
  return progress;
}

void StoreServerImpl::handle(Conn& c, Request request) {
  if (!c.authenticated && request.op != Op::kHello) {
    reject(c, str_cat("first message is ", store::op_name(request.op), ", not HELLO"));
    return;
  }
  switch (request.op) {
    case Op::kHello:
      c.authenticated = true;
      if (request.value != store::kProtocolMagic) {
        send_reply(c, Reply{Code::kMismatch,
                            str_cat("client speaks store protocol '", request.value, "', server speaks '",
                                    store::kProtocolMagic, "': are all ranks running the same kolo?"),
                            0});
      } else {
        send_reply(c, Reply{});
      }
      return;
    case Op::kSet:
    case Op::kSetOwned:
      data_[request.keys[0]] = std::move(request.value);
      if (request.op == Op::kSetOwned) {
        owner_[request.keys[0]] = c.id;
      } else {
        owner_.erase(request.keys[0]);  // a plain SET makes the key nobody's
      }
      send_reply(c, Reply{});
      key_changed(request.keys[0]);
      return;
    case Op::kPeek: {
      auto it = data_.find(request.keys[0]);
      send_reply(c, it == data_.end() ? Reply{} : Reply{Code::kOk, it->second, 1});
      return;
    }
    case Op::kAdd: {
      const std::string& key = request.keys[0];
      int64_t current = 0;
      auto it = data_.find(key);
      if (it != data_.end()) {
        const std::string& text = it->second;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
        if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
          send_reply(c, Reply{Code::kInvalidUsage,
                              str_cat("ADD on key '", key, "' whose value '", text.substr(0, 40),
                                      "' is not a decimal integer"),
                              0});
          return;
        }
      }
      int64_t updated = 0;
      if (__builtin_add_overflow(current, request.number, &updated)) {
        send_reply(c, Reply{Code::kInvalidArgument,
                            str_cat("ADD of ", request.number, " to key '", key, "' (", current, ") overflows int64"),
                            0});
        return;
      }
      data_[key] = std::to_string(updated);
      send_reply(c, Reply{Code::kOk, "", updated});
      key_changed(key);
      return;
    }
    case Op::kGet:
    case Op::kWait:
    case Op::kGather:
      c.parked_until = request.op == Op::kGather ? now_seconds() + static_cast<double>(request.wait_ms) / 1e3 : 0;
      c.parked = std::move(request);
      c.parked_next = 0;
      try_answer(c);
      return;
    case Op::kReply: break;  // decode_request never yields it
  }
  reject(c, str_cat("unexpected op ", static_cast<int>(request.op)));
}

// Answers a parked GET/WAIT/GATHER if all its keys exist; otherwise registers it under the
// first missing key.
bool StoreServerImpl::try_answer(Conn& c) {
  const Request& request = *c.parked;
  const bool gather = request.op == Op::kGather;
  const int64_t count = gather ? request.number : static_cast<int64_t>(request.keys.size());
  auto key_at = [&](int64_t i) { return gather ? str_cat(request.keys[0], request.first + i) : request.keys[i]; };
  for (; c.parked_next < count; ++c.parked_next) {
    std::string key = key_at(c.parked_next);
    if (data_.count(key) == 0) {
      c.parked_on = std::move(key);
      waiters_[c.parked_on].push_back(c.id);
      return false;
    }
  }
  // An owned key may have gone with its owner since it was counted: start again.
  for (int64_t i = 0; i < count; ++i) {
    if (data_.count(key_at(i)) == 0) {
      c.parked_next = 0;
      return try_answer(c);
    }
  }
  Reply reply;
  if (request.op == Op::kGet) reply.payload = data_[request.keys[0]];
  if (gather) {
    for (int64_t i = 0; i < count && reply.code == Code::kOk; ++i) {
      const std::string& value = data_[key_at(i)];
      if (reply.payload.size() + value.size() + 4 > kStoreMaxValueBytes) {
        reply = Reply{Code::kInvalidArgument,
                      str_cat("GATHER of ", count, " keys under '", request.keys[0].substr(0, 60), "' exceeds the ",
                              kStoreMaxValueBytes, "-byte reply limit at key ", i),
                      0};
        break;
      }
      store::append_gathered(reply.payload, value);
    }
  }
  c.parked.reset();
  c.parked_on.clear();
  send_reply(c, reply);
  return true;
}

// Until the next GATHER gives up, at most a second.
int StoreServerImpl::poll_ms() const {
  double wake = now_seconds() + 1.0;
  for (const auto& [id, c] : conns_) {
    if (c->parked && c->parked_until > 0) wake = std::min(wake, c->parked_until);
  }
  return std::max(0, static_cast<int>((wake - now_seconds()) * 1e3) + 1);
}

// A GATHER past its wait: TIMEOUT, with the indices still missing (the ranks that never
// posted, which the caller names in its error).
void StoreServerImpl::expire_gathers() {
  const double now = now_seconds();
  for (auto& [id, c] : conns_) {
    if (c->closed || !c->parked || c->parked_until <= 0 || now < c->parked_until) continue;
    const Request request = *c->parked;
    unregister_waiter(*c);
    std::string missing;
    for (int64_t i = 0; i < request.number && missing.size() < 4096; ++i) {
      const int64_t key = request.first + i;
      if (data_.count(str_cat(request.keys[0], key)) == 0) missing += str_cat(missing.empty() ? "" : ",", key);
    }
    send_reply(*c, Reply{Code::kTimeout, missing, 0});
    flush(*c);
  }
}

void StoreServerImpl::key_changed(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : ids) {
    auto conn = conns_.find(id);
    if (conn == conns_.end()) continue;
    Conn& c = *conn->second;
    if (c.closed || !c.parked || c.parked_on != key) continue;
    if (try_answer(c)) flush(c);
  }
}

void StoreServerImpl::send_reply(Conn& c, const Reply& reply) {
  Result<std::string> body = store::encode_reply(reply);
  if (!body.ok()) body = store::encode_reply(Reply{Code::kInternal, body.status().message(), 0});
  c.out += c.codec.seal(body.value());
}

void StoreServerImpl::flush(Conn& c) {
  while (c.pending_output() > 0) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.pending_output(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_conn(c, str_cat("send failed: ", std::strerror(errno)));
    return;
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
  } else if (c.out_sent > kOutputHighWater) {
    c.out.erase(0, c.out_sent);
    c.out_sent = 0;
  }
}

void StoreServerImpl::reject(Conn& c, const std::string& reason) {
  if (c.closed) return;
  rejected_.fetch_add(1);
  log_warn(Subsys::kBootstrap, "store: dropped connection from ", c.peer, ": ", reason);
  unregister_waiter(c);
  erase_owned(c);
  c.closed = true;
  c.fd.reset();
}

void StoreServerImpl::close_conn(Conn& c, const std::string& reason) {
  if (c.closed) return;
  log_trace(Subsys::kBootstrap, "store: connection from ", c.peer, " ended: ", reason);
  unregister_waiter(c);
  erase_owned(c);
  c.closed = true;
  c.fd.reset();
}

void StoreServerImpl::unregister_waiter(Conn& c) {
  if (!c.parked) return;
  auto it = waiters_.find(c.parked_on);
  if (it != waiters_.end()) {
    std::erase(it->second, c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
  c.parked.reset();
}

// A connection's SET_OWNED keys go with it: a process that died (its socket closed by the
// kernel) is seen as gone by every PEEK after, which is how an elastic job learns who left.
void StoreServerImpl::erase_owned(Conn& c) {
  std::erase_if(owner_, [&](const auto& entry) {
    if (entry.second != c.id) return false;
    data_.erase(entry.first);
    return true;
  });
}

void StoreServerImpl::sweep() {
  std::erase_if(conns_, [](const auto& entry) { return entry.second->closed; });
}

}  // namespace

Result<std::unique_ptr<StoreServer>> StoreServer::start(const std::string& bind_host, uint16_t port,
                                                        const std::string& secret) {
  std::string where = str_cat(bind_host.empty() ? "*" : bind_host, ":", port);
  Result<Fd> listening = listen_tcp(bind_host, port);
  if (!listening.ok()) return listening.status().with_context(str_cat("store cannot listen on ", where, ": "));
  Fd listen_fd = listening.take();
  KOLO_TRY(set_nonblocking(listen_fd.get(), true));
  Result<uint16_t> bound = local_port(listen_fd.get());
  if (!bound.ok()) return bound.status();
  Fd wake_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd.valid()) return error(Code::kSystem, "store: eventfd: ", std::strerror(errno));

  auto server = std::make_unique<StoreServerImpl>(std::move(listen_fd), std::move(wake_fd), secret, bound.value());
  if (secret.empty()) {
    log_warn(Subsys::kBootstrap, "store on port ", bound.value(),
             " runs WITHOUT authentication (KOLO_INSECURE): anyone who can reach it can read and "
             "change the job's rendezvous data; use only on a trusted network");
  }
  KOLO_TRY(server->start_thread());
  add_live_server(server.get());
  log_info(Subsys::kBootstrap, "store listening on ", bind_host.empty() ? "*" : bind_host, ":", bound.value());
  return std::unique_ptr<StoreServer>(std::move(server));
}

}  // namespace kolo
