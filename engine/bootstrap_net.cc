#include "engine/bootstrap_net.h"

#include <poll.h>

#include <cstring>

#include "engine/elastic.h"
#include "support/log.h"

namespace kolo {
namespace {

constexpr uint64_t kBootTag = uint64_t{0x7ffffff1} << 32;  // apart from collective and calibration tags
constexpr size_t kMaxEntryBytes = 16u << 20;
// A peer's claimed blob length is checked before anything is sized by it.
constexpr uint64_t kMaxBlobBytes = uint64_t{256} << 20;
// Left of the deadline for asking the store who is missing after a step fails: this, or a
// quarter of a shorter deadline (a KOLO_TIMEOUT of 1 s left the steps nothing: a rank that
// started half a second after rank 0 failed the start-up).
constexpr double kExplainSeconds = 1.0;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

void append_entry(std::string& blob, int rank, const std::string& entry) {
  put_u32(blob, static_cast<uint32_t>(rank));
  put_u32(blob, static_cast<uint32_t>(entry.size()));
  blob += entry;
}

Status decode_entries(const std::string& blob, int size, bool complete, std::vector<std::string>* entries,
                      std::vector<bool>* seen) {
  entries->resize(size);
  seen->resize(size, false);
  size_t at = 0;
  while (at < blob.size()) {
    if (blob.size() - at < 8) return error(Code::kRemote, "start-up exchange: a truncated entry header");
    const uint32_t rank = get_u32(blob.data() + at), length = get_u32(blob.data() + at + 4);
    at += 8;
    if (rank >= static_cast<uint32_t>(size)) return error(Code::kRemote, "start-up exchange: an entry of rank ", rank);
    if ((*seen)[rank]) return error(Code::kRemote, "start-up exchange: rank ", rank, "'s entry twice");
    if (length > kMaxEntryBytes || length > blob.size() - at) {
      return error(Code::kRemote, "start-up exchange: rank ", rank, "'s entry claims ", length, " bytes");
    }
    (*entries)[rank].assign(blob, at, length);
    (*seen)[rank] = true;
    at += length;
  }
  if (complete) {
    for (int r = 0; r < size; ++r) {
      if (!(*seen)[r]) return error(Code::kRemote, "start-up exchange: no entry of rank ", r);
    }
  }
  return Status();
}

Result<std::unique_ptr<BootstrapNet>> BootstrapNet::create(const CommSite& site, StoreClient& liveness,
                                                           std::string live_prefix, const Deadline& deadline) {
  std::unique_ptr<BootstrapNet> net(new BootstrapNet());
  net->site_ = site;
  net->site_.prefix = str_cat(site.prefix, "/boot");
  net->liveness_ = &liveness;
  net->live_prefix_ = std::move(live_prefix);
  const int me = site.rank;
  if (me > 0) net->parent_ = (me - 1) / 2;
  for (int c : {2 * me + 1, 2 * me + 2}) {
    if (c < site.size) net->children_.push_back(c);
  }
  if (site.size == 1) return net;
  auto maker = bootstrap_link_maker(net->site_, deadline);
  if (!maker.ok()) return maker.status();
  net->maker_ = maker.take();
  net->links_.resize(site.size);
  Status linked = net->link_tree(deadline);
  if (!linked.ok()) return net->explain(linked);
  return net;
}

BootstrapNet::~BootstrapNet() {
  if (maker_) maker_->stop();
  for (auto& link : links_) {
    if (link) link->close();
  }
}

int BootstrapNet::tree_degree() const { return (parent_ >= 0 ? 1 : 0) + static_cast<int>(children_.size()); }

Status BootstrapNet::link_tree(const Deadline& deadline) {
  // Children first: they connect to their parent as soon as they start, so that a parent
  // usually finds their links already made (no race, one connection per pair).
  const Deadline within = steps_within(deadline);
  std::vector<int> peers = children_;
  if (parent_ >= 0) peers.insert(peers.begin(), parent_);
  for (int peer : peers) {
    auto link = maker_->make(peer, within);
    if (!link.ok()) return link.status().with_context(str_cat("start-up exchange, rank ", site_.rank, " linking to rank ", peer, ": "));
    links_[peer] = link.take();
  }
  return Status();
}

// A step that fails closes its links while its requests still exist (a link fails its
// pending requests when it closes): the requests live here, the step's work in step().
Status BootstrapNet::exchange(uint64_t tag, const std::vector<int>& send_to, const std::string& out,
                              const std::vector<int>& recv_from, std::vector<std::string>* in,
                              const Deadline& deadline) {
  Requests r;
  r.sends.resize(2 * send_to.size());
  r.lengths.resize(recv_from.size());
  r.length_reqs.resize(recv_from.size());
  r.data_reqs.resize(recv_from.size());
  Status s = step(tag, send_to, out, recv_from, in, deadline, r);
  if (!s.ok()) {
    for (int peer : send_to) links_[peer]->close_after_failure();
    for (int peer : recv_from) links_[peer]->close_after_failure();
  }
  return s;
}

Status BootstrapNet::step(uint64_t tag, const std::vector<int>& send_to, const std::string& out,
                          const std::vector<int>& recv_from, std::vector<std::string>* in, const Deadline& deadline,
                          Requests& r) {
  r.length_out = out.size();
  std::vector<uint64_t>& lengths = r.lengths;
  std::vector<TransferRequest>& sends = r.sends;
  std::vector<TransferRequest>& length_reqs = r.length_reqs;
  std::vector<TransferRequest>& data_reqs = r.data_reqs;
  std::vector<bool> data_posted(recv_from.size(), false);
  in->assign(recv_from.size(), std::string());
  for (size_t i = 0; i < send_to.size(); ++i) {
    Link& link = *links_[send_to[i]];
    KOLO_TRY(link.post_send(tag, &r.length_out, sizeof(r.length_out), &sends[2 * i]));
    if (!out.empty()) KOLO_TRY(link.post_send(tag + 1, out.data(), out.size(), &sends[2 * i + 1]));
    else sends[2 * i + 1].done = true;
  }
  for (size_t i = 0; i < recv_from.size(); ++i) {
    KOLO_TRY(links_[recv_from[i]]->post_recv(tag, &lengths[i], sizeof(lengths[i]), &length_reqs[i]));
  }
  std::vector<int> peers = send_to;
  peers.insert(peers.end(), recv_from.begin(), recv_from.end());
  while (true) {
    bool done = true;
    for (int peer : peers) KOLO_TRY(links_[peer]->progress().with_context(str_cat("start-up exchange with rank ", peer, ": ")));
    for (size_t i = 0; i < recv_from.size(); ++i) {
      if (!length_reqs[i].done) {
        done = false;
        continue;
      }
      KOLO_TRY(length_reqs[i].status);
      if (!data_posted[i]) {
        if (lengths[i] > kMaxBlobBytes) {
          return error(Code::kRemote, "start-up exchange: rank ", recv_from[i], " sends ", lengths[i],
                       " bytes (at most ", kMaxBlobBytes, ")");
        }
        data_posted[i] = true;
        (*in)[i].resize(lengths[i]);
        if (lengths[i] == 0) {
          data_reqs[i].done = true;
        } else {
          KOLO_TRY(links_[recv_from[i]]->post_recv(tag + 1, (*in)[i].data(), lengths[i], &data_reqs[i]));
        }
      }
      if (!data_reqs[i].done) done = false;
      else KOLO_TRY(data_reqs[i].status);
    }
    for (const TransferRequest& s : sends) {
      if (!s.done) done = false;
      else KOLO_TRY(s.status);
    }
    if (done) return Status();
    if (deadline.expired()) return error(Code::kTimeout, "timed out (KOLO_TIMEOUT)");
    std::vector<pollfd> fds;
    for (int peer : peers) {
      if (links_[peer]->poll_fd() >= 0) fds.push_back(pollfd{links_[peer]->poll_fd(), links_[peer]->poll_events(), 0});
    }
    ::poll(fds.data(), fds.size(), deadline.remaining_ms(100));
  }
}

Result<std::vector<std::string>> BootstrapNet::allgather(const std::string& mine, const Deadline& deadline) {
  const int n = site_.size, me = site_.rank;
  std::vector<std::string> entries;
  std::vector<bool> seen;
  if (n == 1) return std::vector<std::string>{mine};
  const Deadline within = steps_within(deadline);
  // Each allgather's messages have tags of their own: up (length, data), then down.
  const uint64_t up_tag = kBootTag + (round_++ << 2), down_tag = up_tag + 2;
  // Up: my subtree's entries to my parent.
  std::vector<std::string> from_children;
  Status up = exchange(up_tag, {}, "", children_, &from_children, within);
  if (!up.ok()) return explain(up.with_context(str_cat("rank ", me, " waiting for its subtree's entries: ")));
  std::string subtree;
  append_entry(subtree, me, mine);
  for (const std::string& blob : from_children) subtree += blob;
  std::string all;
  if (parent_ >= 0) {
    std::vector<std::string> none;
    Status sent = exchange(up_tag, {parent_}, subtree, {}, &none, within);
    if (!sent.ok()) return explain(sent.with_context(str_cat("rank ", me, " sending to rank ", parent_, ": ")));
    // Down: everyone's entries from my parent.
    std::vector<std::string> from_parent;
    Status down = exchange(down_tag, {}, "", {parent_}, &from_parent, within);
    if (!down.ok()) return explain(down.with_context(str_cat("rank ", me, " waiting for rank ", parent_, ": ")));
    all = std::move(from_parent[0]);
  } else {
    all = std::move(subtree);
  }
  if (!children_.empty()) {
    std::vector<std::string> none;
    Status sent = exchange(down_tag, children_, all, {}, &none, within);
    if (!sent.ok()) return explain(sent.with_context(str_cat("rank ", me, " sending to its children: ")));
  }
  KOLO_TRY(decode_entries(all, n, true, &entries, &seen));
  return entries;
}

// A tree step that failed may be an echo: the rank that never came or died may be far
// from this one. The live keys (set by each rank before the exchange, gone with its store
// connection) say who it is.
Status BootstrapNet::explain(const Status& failure) {
  return name_ranks_gone(failure.with_context("the start-up exchange: "), *liveness_, live_prefix_, site_.size, site_.rank,
                         explain_s_ * 0.8, false);
}

Deadline BootstrapNet::steps_within(const Deadline& deadline) {
  const double left = deadline.remaining_seconds();
  explain_s_ = std::min(kExplainSeconds, std::max(0.0, left / 4));
  return Deadline(left - explain_s_);
}

}  // namespace kolo
