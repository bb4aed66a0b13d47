// Which host this process runs on: ranks with the same identity share memory and are
// "local" to each other. KOLO_HOSTID overrides it, to emulate several hosts on one machine.
#pragma once

#include <string>

namespace kolo {

// The hostname joined with the kernel's boot id (two containers with the same hostname on
// different machines differ). Never empty.
std::string host_identity();

}  // namespace kolo
