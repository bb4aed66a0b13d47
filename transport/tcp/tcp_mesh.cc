#include "transport/tcp/tcp_mesh.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "support/crypto.h"
#include "support/log.h"
#include "transport/tcp/tcp_link.h"

namespace kolo {
namespace {

// The link handshake is a challenge-response in which both ends prove the job's secret:
//
//   acceptor  -> connector: challenge A (32 random bytes, fresh per connection)
//   connector -> acceptor : Hello{magic, from, to, challenge C, HMAC(secret, "hello" | prefix | from | to | A | C)}
//   acceptor  -> connector: HMAC(secret, "answer" | prefix | from | to | A | C)
//
// A binds the connector's MAC to this connection, so a hello recorded on the network (in
// this job, or in an earlier job with the same KOLO_SECRET and so the same communicator
// names) is refused; C does the same for the acceptor's answer. The two labels keep a MAC
// from being reflected back to its sender as the other message. An earlier version sent
// only HMAC(prefix | from | to): anyone who had seen it once could replay it, and the
// acceptor proved nothing to the connector.
constexpr uint32_t kHandshakeMagic = 0x6b6f6c32;  // "kol2": the challenge-response handshake
constexpr size_t kChallengeBytes = 32;
using Challenge = std::array<uint8_t, kChallengeBytes>;

struct Hello {
  uint32_t magic;
  int32_t from;
  int32_t to;
  uint32_t reserved;
  uint8_t challenge[kChallengeBytes];
  uint8_t mac[32];
};
static_assert(sizeof(Hello) == kLinkHelloBytes && kChallengeBytes == kLinkChallengeBytes);

Mac handshake_mac(const MeshOptions& options, const char* label, int from, int to, const Challenge& a,
                  const uint8_t* c) {
  std::string text = str_cat("kolo-link/2|", label, "|", options.prefix, "|", from, "|", to, "|");
  text.append(reinterpret_cast<const char*>(a.data()), a.size());
  text.append(reinterpret_cast<const char*>(c), kChallengeBytes);
  return hmac_sha256(options.secret, text.data(), text.size());
}

bool mac_ok(const MeshOptions& options, const uint8_t* got, const Mac& expected) {
  if (options.secret.empty()) return true;  // KOLO_INSECURE: the same messages, unchecked
  Mac mac{};
  std::memcpy(mac.data(), got, mac.size());
  return mac_equal(mac, expected);
}

bool wanted(const MeshOptions& options, int rank) {
  return rank != options.rank && (options.connect.empty() || options.connect[rank]);
}

// The acceptor's half of one connection, up to its answer: challenge, then the hello
// checked. The caller decides whether to send the answer (take the link) or close.
struct Greeted {
  int from = -1;
  Mac answer{};
};
Result<Greeted> receive_hello(int fd, const MeshOptions& options, const std::vector<std::unique_ptr<Link>>& links,
                              const Deadline& deadline) {
  Challenge a{};
  KOLO_TRY(random_bytes(a.data(), a.size()));
  KOLO_TRY(write_full(fd, a.data(), a.size(), deadline));
  uint8_t bytes[kLinkHelloBytes];
  KOLO_TRY(read_full(fd, bytes, sizeof(bytes), deadline));
  Result<int> from = check_link_hello(bytes, options, links, a);
  if (!from.ok()) return from.status();
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  return Greeted{from.value(), handshake_mac(options, "answer", hello.from, hello.to, a, hello.challenge)};
}

// The connector's half: answers the challenge and checks that the acceptor knows the secret
// too (the address came from the store, but whoever listens there now may not be the rank).
Status greet_peer(int fd, const MeshOptions& options, int peer, const Deadline& deadline) {
  const char* hint = " — is KOLO_SECRET the same on every rank?";
  Challenge a{};
  Status s = read_full(fd, a.data(), a.size(), deadline);
  if (!s.ok()) return s.with_context("waiting for its link challenge: ");
  Hello hello{kHandshakeMagic, options.rank, peer, 0, {}, {}};
  KOLO_TRY(random_bytes(hello.challenge, sizeof(hello.challenge)));
  Mac mac = handshake_mac(options, "hello", options.rank, peer, a, hello.challenge);
  std::memcpy(hello.mac, mac.data(), mac.size());
  KOLO_TRY(write_full(fd, &hello, sizeof(hello), deadline));
  Mac answer{};
  s = read_full(fd, answer.data(), answer.size(), deadline);
  if (!s.ok()) {
    return Status(s.code(), str_cat("no answer to the link handshake (", s.message(), "): the peer refused it", hint));
  }
  if (!mac_ok(options, answer.data(), handshake_mac(options, "answer", options.rank, peer, a, hello.challenge))) {
    return error(Code::kRemote, "the listener did not prove the job's secret: not rank ", peer,
                 " of this job (another job on its port?)", hint);
  }
  return Status();
}

}  // namespace

Result<int> check_link_hello(const uint8_t (&bytes)[kLinkHelloBytes], const MeshOptions& options,
                             const std::vector<std::unique_ptr<Link>>& links,
                             const std::array<uint8_t, kLinkChallengeBytes>& challenge) {
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  const Challenge& a = challenge;
  if (hello.magic != kHandshakeMagic) {
    return error(Code::kRemote, "not a kolo link handshake (magic ", hello.magic, "; another kolo version?)");
  }
  const bool direction_ok = options.any_direction ? hello.from >= 0 && hello.from != options.rank
                                                  : hello.from > options.rank;
  if (hello.to != options.rank || !direction_ok || hello.from >= options.size || !wanted(options, hello.from)) {
    return error(Code::kRemote, "handshake from rank ", hello.from, " to rank ", hello.to,
                 " is not one this rank expects");
  }
  if (links[hello.from]) return error(Code::kRemote, "rank ", hello.from, " is already connected");
  if (!mac_ok(options, hello.mac, handshake_mac(options, "hello", hello.from, hello.to, a, hello.challenge))) {
    return error(Code::kRemote, "handshake claiming rank ", hello.from,
                 " failed authentication (wrong KOLO_SECRET, forged or replayed)");
  }
  return static_cast<int>(hello.from);
}

// The maker's state, shared by the rank's threads and its acceptor thread.
class TcpLinkMaker::Impl {
 public:
  // Per peer: nothing yet; this rank is connecting to it; this rank waits for it to
  // connect; its connection is here (accepted, or this rank's own, answered); handed out.
  enum class State : uint8_t { kNone, kConnecting, kWaiting, kLinked, kTaken };

  Impl(StoreClient& store, MeshOptions options, Fd listener, Fd wake)
      : store_(store),
        options_(std::move(options)),
        listener_(std::move(listener)),
        wake_(std::move(wake)),
        state_(options_.size, State::kNone),
        accepted_(options_.size),
        no_links_(options_.size) {}

  ~Impl() { stop(); }

  void start_thread() { thread_ = std::thread([this] { accept_loop(); }); }
  int rank() const { return options_.rank; }

  void stop() {
    if (stopped_.exchange(true)) return;
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
    listener_.reset();
  }

  Result<std::unique_ptr<Link>> connect_now(int peer, bool lazy, const Deadline& deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_[peer] == State::kLinked) return take(peer);
      if (state_[peer] != State::kNone) return busy(peer);
      state_[peer] = State::kConnecting;
    }
    // A timed GET: a peer that never came is an answer naming it, and the store connection
    // stays usable for the error's diagnosis.
    Result<std::vector<std::string>> addresses = store_.gather_range(str_cat(options_.prefix, "/tcp/"), peer, 1, deadline);
    Result<std::string> address = addresses.ok() ? Result<std::string>(addresses.value()[0])
                                                 : Result<std::string>(addresses.status().with_context(
                                                       str_cat("rank ", peer, " never published its address: ")));
    Status greeted = address.status();
    Fd fd;
    if (address.ok()) {
      Result<HostPort> target = parse_host_port(address.value());
      Result<Fd> connected = target.ok() ? connect_tcp(target.value(), deadline) : Result<Fd>(target.status());
      greeted = connected.ok() ? greet_peer(connected.value().get(), options_, peer, deadline)
                               : connected.status();
      if (connected.ok()) fd = connected.take();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (greeted.ok()) {
      if (state_[peer] == State::kLinked) {  // the peer's acceptor took ours and ours took theirs
        return error(Code::kInternal, "rank ", options_.rank, " and rank ", peer, " both made their link");
      }
      state_[peer] = State::kTaken;
      return std::unique_ptr<Link>(std::make_unique<TcpLink>(options_.rank, peer, std::move(fd)));
    }
    const std::string where = address.ok() ? str_cat(" at ", address.value()) : "";
    Status failed =
        greeted.with_context(str_cat("rank ", options_.rank, " connecting to rank ", peer, where, ": "));
    // Declined: the peer connects to this rank itself (it is the lower rank and connects
    // too), or its connection came first. Its link arrives through the acceptor.
    if (lazy && address.ok()) {
      changed_.wait_until(lock, deadline.at(), [&] { return state_[peer] == State::kLinked || stopped_; });
      if (state_[peer] == State::kLinked) return take(peer);
      state_[peer] = State::kNone;
      return failed.with_context(str_cat("rank ", peer, " did not connect either: "));
    }
    state_[peer] = State::kNone;
    return failed;
  }

  Result<std::unique_ptr<Link>> wait_for(int peer, const Deadline& deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (state_[peer] == State::kNone) state_[peer] = State::kWaiting;
    changed_.wait_until(lock, deadline.at(), [&] { return state_[peer] == State::kLinked || stopped_; });
    if (state_[peer] == State::kLinked) return take(peer);
    state_[peer] = State::kNone;
    return error(Code::kTimeout, "rank ", options_.rank, " waiting for rank ", peer,
                 " to connect: it did not (is it alive, and is KOLO_LAZY_CONNECT the same on every rank?)");
  }

 private:
  // Caller holds mutex_ and state_[peer] is kLinked.
  Result<std::unique_ptr<Link>> take(int peer) {
    state_[peer] = State::kTaken;
    return std::unique_ptr<Link>(std::make_unique<TcpLink>(options_.rank, peer, std::move(accepted_[peer])));
  }

  Status busy(int peer) const {
    return error(Code::kInternal, "rank ", options_.rank, " asked twice for its link to rank ", peer);
  }

  void accept_loop() {
    while (!stopped_) {
      pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
        log_warn(Subsys::kTransport, "rank ", options_.rank, ": tcp acceptor stops: poll failed");
        return;
      }
      if (fds[1].revents != 0 || stopped_) return;
      if ((fds[0].revents & POLLIN) == 0) continue;
      Result<Fd> fd = accept_tcp(listener_.get(), Deadline(0));
      if (!fd.ok()) {
        // Out of descriptors (EMFILE): the peer's connect waits in the backlog; try again soon.
        log_warn(Subsys::kTransport, "rank ", options_.rank, ": accepting a tcp link: ", fd.status().message());
        ::poll(nullptr, 0, 50);
        continue;
      }
      answer(fd.take());
    }
  }

  // One accepted connection: challenge, hello, then the choice (under the lock, so that a
  // connect of this rank's own to the same peer sees it), then the answer or a close.
  void answer(Fd fd) {
    // A stray connection that sends nothing must not hold up the peers behind it.
    const Deadline handshake(5.0);
    Result<Greeted> greeted = receive_hello(fd.get(), options_, no_links_, handshake);
    if (!greeted.ok()) {
      log_warn(Subsys::kTransport, "rank ", options_.rank, " dropped a connection with a bad handshake: ",
               greeted.status().message());
      return;
    }
    const int peer = greeted.value().from;
    const Mac& reply = greeted.value().answer;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const State st = state_[peer];
      // The lower rank's connection wins a race; a second one is a duplicate.
      const bool take_it = st == State::kNone || st == State::kWaiting ||
                           (st == State::kConnecting && peer < options_.rank);
      if (!take_it) {
        log_trace(Subsys::kTransport, "rank ", options_.rank, " declined rank ", peer,
                  "'s connection: its own to that rank stands");
        return;  // closing it tells the peer to take ours
      }
      if (!write_full(fd.get(), reply.data(), reply.size(), handshake).ok()) return;
      accepted_[peer] = std::move(fd);
      state_[peer] = State::kLinked;
    }
    changed_.notify_all();
  }

  StoreClient& store_;
  const MeshOptions options_;
  Fd listener_;
  Fd wake_;  // eventfd: stop() wakes the acceptor's poll
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<State> state_;
  std::vector<Fd> accepted_;  // kLinked: the connection to hand out
  const std::vector<std::unique_ptr<Link>> no_links_;  // check_link_hello's duplicate check: the states do it
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

TcpLinkMaker::TcpLinkMaker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpLinkMaker::~TcpLinkMaker() = default;

Result<std::unique_ptr<TcpLinkMaker>> TcpLinkMaker::start(StoreClient& store, const MeshOptions& options,
                                                         const Deadline& deadline) {
  Result<Fd> listener = listen_tcp(options.listen_ip, 0, 1024);
  if (!listener.ok()) return listener.status().with_context("tcp transport: ");
  Result<uint16_t> port = local_port(listener.value().get());
  if (!port.ok()) return port.status();
  Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return error(Code::kSystem, "tcp transport: eventfd: ", std::strerror(errno));
  HostPort self{options.listen_ip, port.value()};
  auto impl = std::make_unique<Impl>(store, options, listener.take(), std::move(wake));
  impl->start_thread();
  std::unique_ptr<TcpLinkMaker> maker(new TcpLinkMaker(std::move(impl)));
  maker->address_ = self.to_string();
  KOLO_TRY(store.set(str_cat(options.prefix, "/tcp/", options.rank), maker->address_, deadline));
  log_trace(Subsys::kTransport, "rank ", options.rank, " listens for tcp links at ", maker->address_,
            options.any_direction ? " (each made when first needed)" : "");
  return maker;
}

Result<std::unique_ptr<Link>> TcpLinkMaker::make(int peer, const Deadline& deadline) {
  auto link = impl_->connect_now(peer, /*lazy=*/true, deadline);
  if (link.ok()) log_trace(Subsys::kTransport, "rank ", impl_->rank(), " linked to rank ", peer, " over tcp (", address_, ")");
  return link;
}

Result<std::unique_ptr<Link>> TcpLinkMaker::connect_now(int peer, bool wait_if_declined, const Deadline& deadline) {
  return impl_->connect_now(peer, wait_if_declined, deadline);
}

Result<std::unique_ptr<Link>> TcpLinkMaker::wait_for(int peer, const Deadline& deadline) {
  return impl_->wait_for(peer, deadline);
}

void TcpLinkMaker::stop() { impl_->stop(); }

Result<std::vector<std::unique_ptr<Link>>> connect_tcp_mesh(StoreClient& store, const MeshOptions& options,
                                                           const Deadline& deadline) {
  std::vector<std::unique_ptr<Link>> links(options.size);
  int peers = 0;
  for (int r = 0; r < options.size; ++r) peers += wanted(options, r);
  if (peers == 0) return links;
  auto maker = TcpLinkMaker::start(store, options, deadline);
  if (!maker.ok()) return maker.status();
  for (int peer = 0; peer < options.rank; ++peer) {
    if (!wanted(options, peer)) continue;
    auto link = maker.value()->connect_now(peer, /*wait_if_declined=*/false, deadline);
    if (!link.ok()) return link.status();
    links[peer] = link.take();
  }
  for (int peer = options.rank + 1; peer < options.size; ++peer) {
    if (!wanted(options, peer)) continue;
    auto link = maker.value()->wait_for(peer, deadline);
    if (!link.ok()) return link.status();
    links[peer] = link.take();
  }
  log_info(Subsys::kTransport, "rank ", options.rank, " connected to ", peers, " peers over tcp (",
           maker.value()->address(), ")");
  return links;
}

}  // namespace kolo
