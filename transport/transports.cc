// The transport table's rows: the one file that names the backends.
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"
#ifdef KOLO_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif

namespace kolo {

const std::vector<TransportRow>& transport_table() {
  // Default order: shm within a host; then tcp (measured faster than UCX's TCP wire on
  // networks without RDMA, see transport/README.md); ucx where allowed (KOLO_TRANSPORTS).
  static const std::vector<TransportRow> table = {
      shm::shm_transport_row(), tcp_transport_row(),
#ifdef KOLO_HAVE_UCX
      ucx::ucx_transport_row(),
#endif
  };
  return table;
}

const char* transport_unreachable_hint() { return " (another host, or shm not allowed there); add tcp"; }

}  // namespace kolo
