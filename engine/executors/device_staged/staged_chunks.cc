#include "engine/executors/device_staged/staged_chunks.h"

namespace kolo::staged {
namespace {

// The pieces of `view`, each to where it lies in the staging of `region` (at `at`).
void add_copies(const View& view, const View& region, size_t at, std::vector<Copy>* copies) {
  for (size_t q = 0; q < view.blocks; ++q) {
    const char* d = view.device + q * view.stride;
    copies->push_back({const_cast<char*>(d), at + region.locate(d, view.bytes), view.bytes});
  }
}

// Where each region of each part goes in the chunk's staging, and the copies in and out.
Status lay_out(const std::vector<Part>& parts, int rank, Chunk* chunk) {
  size_t end = 0;
  for (const Part& p : parts) {
    Layout l;
    KOLO_TRY(layout_of(p, rank, &l));
    size_t at[2] = {0, 0};
    for (int r = 0; r < l.regions; ++r) {
      at[r] = end;
      end += staged_aligned(l.region[r].total());
    }
    CollCall host = p.call;
    host.spec.device = false;
    host.stream = nullptr;
    const size_t send_at = l.send_in < 0 ? kNowhere : at[l.send_in] + l.region[l.send_in].locate(p.send.device, p.send.bytes);
    const size_t recv_at = l.recv_in < 0 ? kNowhere : at[l.recv_in] + l.region[l.recv_in].locate(p.recv.device, p.recv.bytes);
    host.send = host.recv = nullptr;  // enqueue() points them into the staging
    chunk->send_at.push_back(send_at);
    chunk->recv_at.push_back(recv_at);
    if (l.whole_in) {
      add_copies(l.region[0], l.region[0], at[0], &chunk->ins);
    } else if (l.send_in >= 0) {
      add_copies(p.send, l.region[l.send_in], at[l.send_in], &chunk->ins);
    }
    if (l.recv_in >= 0) add_copies(p.recv, l.region[l.recv_in], at[l.recv_in], &chunk->outs);
    chunk->host_calls.push_back(host);
  }
  chunk->bytes = end;
  return Status();
}

}  // namespace

Status chunks_of(const CollCall* calls, size_t n, size_t per, int ranks, int rank, std::vector<Chunk>* chunks) {
  if (n != 1) per = 0;
  if (per != 0 && !cuttable(calls[0], ranks, rank)) {
    return error(Code::kInvalidArgument, "rank ", rank, ": device ", coll_name(calls[0].spec.kind),
                 " with send and recv buffers that overlap other than in place cannot be staged in chunks");
  }
  if (per == 0) {
    std::vector<Part> parts;
    for (size_t i = 0; i < n; ++i) parts.push_back(part_of(calls[i], 0, calls[i].spec.count, ranks, rank));
    chunks->emplace_back();
    return lay_out(parts, rank, &chunks->back());
  }
  const size_t count = calls[0].spec.count;
  for (size_t first = 0; first < count; first += per) {
    chunks->emplace_back();
    KOLO_TRY(lay_out({part_of(calls[0], first, std::min(per, count - first), ranks, rank)}, rank, &chunks->back()));
  }
  return Status();
}

}  // namespace kolo::staged
