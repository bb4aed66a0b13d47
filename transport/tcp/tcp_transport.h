// The tcp row of the transport table: every peer is reachable; links over a TCP mesh.
#pragma once

#include "transport/transport.h"

namespace kolo {

TransportRow tcp_transport_row();
// The start-up exchange's links (bootstrap_link_maker in transport.h), over tcp.
Result<std::unique_ptr<LinkMaker>> tcp_bootstrap_maker(const CommSite& site, const Deadline& deadline);

}  // namespace kolo
