// The transport table's rows: the one file that names the backends.
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace kolo {

const std::vector<TransportRow>& transport_table() {
  static const std::vector<TransportRow> table = {shm::shm_transport_row(), tcp_transport_row()};
  return table;
}

const char* transport_unreachable_hint() { return " (another host, or shm not allowed there); add tcp"; }

}  // namespace kolo
