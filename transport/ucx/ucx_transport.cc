#include "transport/ucx/ucx_transport.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "support/crypto.h"
#include "support/log.h"
#include "transport/ucx/ucx_link.h"

namespace kolo::ucx {
namespace {

Status check_env() { return Status(); }  // UCX reads its own UCX_* variables

bool reachable(const TransportEnv&, int, int) { return true; }

Mac hello_mac(const TransportEnv& env, int from, int to) {
  const std::string text = str_cat("kolo-ucx-link|", env.prefix, "|", from, "|", to);
  return hmac_sha256(env.secret, text.data(), text.size());
}

// Every pair sends each other a hello carrying an HMAC of (communicator, from, to) under
// the job's secret: UCX connects lazily, so this proves each path now (a peer that cannot
// be reached is named at start-up, not at the first collective) and that the peer holds
// the secret.
Status exchange_hellos(const TransportEnv& env, const std::vector<int>& peers,
                       std::vector<std::unique_ptr<Link>>& links, const Deadline& deadline) {
  // On any failure the links are closed before `hellos` goes: UCX may hold its buffers.
  struct CloseOnFailure {
    const std::vector<int>& peers;
    std::vector<std::unique_ptr<Link>>& links;
    bool armed = true;
    ~CloseOnFailure() {
      if (!armed) return;
      for (int peer : peers) links[peer]->close();
    }
  };
  struct Hello {
    Mac out, in;
    TransferRequest sent, received;
  };
  std::vector<Hello> hellos(peers.size());
  CloseOnFailure guard{peers, links};  // declared after hellos: runs before they go
  std::vector<bool> said(peers.size(), false);
  // The lower rank of a pair speaks first and the higher answers once it has heard, so
  // UCX sets up each pair's connection from one side only (connections made from both
  // ends at once were later dropped by UCX 1.13 as "Endpoint timeout").
  for (size_t i = 0; i < peers.size(); ++i) {
    Link* link = links[peers[i]].get();
    hellos[i].out = hello_mac(env, env.rank, peers[i]);
    KOLO_TRY(link->post_recv(kHelloTag, hellos[i].in.data(), sizeof(Mac), &hellos[i].received));
    if (peers[i] > env.rank) {
      KOLO_TRY(link->post_send(kHelloTag, hellos[i].out.data(), sizeof(Mac), &hellos[i].sent));
      said[i] = true;
    }
  }
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < peers.size(); ++i) {
      Link* link = links[peers[i]].get();
      KOLO_TRY(link->progress());
      if (!said[i] && hellos[i].received.done) {
        KOLO_TRY(link->post_send(kHelloTag, hellos[i].out.data(), sizeof(Mac), &hellos[i].sent));
        said[i] = true;
      }
      all &= said[i];
      for (TransferRequest* r : {&hellos[i].sent, &hellos[i].received}) {
        if (r->done && !r->status.ok()) return r->status;
        all &= r->done;
      }
    }
    if (all) break;
    if (deadline.expired()) {
      std::string missing;
      for (size_t i = 0; i < peers.size(); ++i) {
        if (!hellos[i].received.done) missing += str_cat(missing.empty() ? "" : ", ", peers[i]);
      }
      return error(Code::kTimeout, "ucx transport: rank ", env.rank, " heard nothing from rank(s) ", missing,
                   " over UCX before the deadline (KOLO_TIMEOUT): unreachable with the transports UCX chose "
                   "(UCX_TLS, UCX_NET_DEVICES), or not started");
    }
    ::poll(nullptr, 0, 1);
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!env.secret.empty() && !mac_equal(hellos[i].in, hello_mac(env, peers[i], env.rank))) {
      return error(Code::kRemote, "ucx transport: rank ", env.rank, ": rank ", peers[i],
                   "'s hello does not carry the job's secret (another job, or a forged peer)");
    }
  }
  guard.armed = false;
  return Status();
}

// How the communicator sleeps while UCX links are pending: on the worker's event
// descriptor, armed, but at most 1 ms at a time. UCX 1.13's descriptor did not wake for
// some events (between test hosts of one machine a 1-second scenario took 35 s with
// 100 ms sleeps), so a missed wake-up must cost little.
class UcxWake final : public WakeSource {
 public:
  explicit UcxWake(std::shared_ptr<UcxWorker> worker) : worker_(std::move(worker)) {}
  void arm() override {}
  void sleep(int timeout_ms) override {
    if (aborted_.load(std::memory_order_relaxed)) return;
    if (worker_->progress()) return;  // work done: the caller looks at it first
    pollfd fd{worker_->event_fd(), POLLIN, 0};  // progress() left the worker armed
    ::poll(&fd, 1, std::min(timeout_ms, 1));
  }
  void abort() override {
    aborted_.store(true, std::memory_order_relaxed);
    worker_->signal();
  }

 private:
  std::shared_ptr<UcxWorker> worker_;
  std::atomic<bool> aborted_{false};
};

Status connect(const TransportEnv& env, const std::vector<int>& peers, const Deadline& deadline,
               TransportOutput* out) {
  if (env.size > kMaxRanks) {
    return error(Code::kUnsupported, "ucx transport: ", env.size, " ranks; UCX tags carry at most ", kMaxRanks);
  }
  auto created = UcxWorker::create();
  if (!created.ok()) return created.status();
  std::shared_ptr<UcxWorker> worker(created.take());
  KOLO_TRY(env.store->set(str_cat(env.prefix, "/ucx/", env.rank), to_hex(worker->address().data(),
                                                                        worker->address().size()), deadline));
  for (int peer : peers) {
    auto hex = env.store->get(str_cat(env.prefix, "/ucx/", peer), deadline);
    if (!hex.ok()) return hex.status();
    auto address = from_hex(hex.value());
    if (!address.ok()) return address.status().with_context(str_cat("ucx transport: rank ", peer, "'s address: "));
    auto link = UcxLink::connect(env.rank, peer, worker, address.value());
    if (!link.ok()) return link.status();
    out->links[peer] = link.take();
  }
  KOLO_TRY(exchange_hellos(env, peers, out->links, deadline));
  out->wake = std::make_unique<UcxWake>(worker);
  log_info(Subsys::kTransport, "rank ", env.rank, " connected to ", peers.size(), " peers over ucx");
  return Status();
}

}  // namespace

TransportRow ucx_transport_row() { return TransportRow{"ucx", check_env, reachable, connect}; }

}  // namespace kolo::ucx
