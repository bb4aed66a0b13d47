// The "ucx" row of the transport table (transport.h): links over UCX's tagged messages, to
// any peer (UCX chooses the wire: RDMA where the hardware is, TCP or shared memory
// otherwise). Built where Debian's libucx-dev (pkg-config "ucx") is found.
#pragma once

#include "transport/transport.h"

namespace kolo::ucx {

TransportRow ucx_transport_row();

}  // namespace kolo::ucx
