// The shm row of the transport table: peers on this host; links over the rings of one
// shm::Domain per host, which is also the memory its ranks share (SharedDomain), and a
// wake source that sleeps on the domain's inbox futex.
#pragma once

#include "transport/transport.h"

namespace kolo::shm {

TransportRow shm_transport_row();

}  // namespace kolo::shm
