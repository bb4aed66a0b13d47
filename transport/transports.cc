// The transport table's rows: the one file that names the backends.
#include <filesystem>

#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"
#ifdef KOLO_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif

namespace kolo {

#ifdef KOLO_HAVE_UCX
namespace {
// An RDMA device (InfiniBand or RoCE) on this host, as the kernel lists them.
bool rdma_present() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}
}  // namespace
#endif

const std::vector<TransportRow>& transport_table() {
  // The default order (KOLO_TRANSPORTS unset), the one place it is decided:
  //   shm within a host;
  //   between hosts ucx where this host has an RDMA device (UCX drives it through
  //   libibverbs), else tcp: over TCP kolo's own tcp measured faster than UCX's TCP wire
  //   (bench/results/2026-11-26-test-hosts-ucx-cpu.md).
  // A pair uses the lower rank's order, so hosts that differ still agree.
  static const std::vector<TransportRow> table = [] {
    std::vector<TransportRow> rows = {shm::shm_transport_row(), tcp_transport_row()};
#ifdef KOLO_HAVE_UCX
    if (rdma_present()) rows.insert(rows.begin() + 1, ucx::ucx_transport_row());
    else rows.push_back(ucx::ucx_transport_row());
#endif
    return rows;
  }();
  return table;
}

Result<std::unique_ptr<LinkMaker>> bootstrap_link_maker(const CommSite& site, const Deadline& deadline) {
  return tcp_bootstrap_maker(site, deadline);
}

const char* transport_unreachable_hint() { return " (another host, or shm not allowed there); add tcp"; }

}  // namespace kolo
