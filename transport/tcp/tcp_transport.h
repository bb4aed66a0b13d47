// The tcp row of the transport table: every peer is reachable; links over a TCP mesh.
#pragma once

#include "transport/transport.h"

namespace kolo {

TransportRow tcp_transport_row();

}  // namespace kolo
