// HMAC-SHA256 and random bytes (OpenSSL), for authenticating bootstrap and link set-up.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "support/status.h"

namespace kolo {

using Mac = std::array<uint8_t, 32>;

// HMAC-SHA256 of the concatenation of parts under key.
Mac hmac_sha256(const std::string& key, const void* data, size_t size);
// Constant-time comparison.
bool mac_equal(const Mac& a, const Mac& b);
Status random_bytes(void* out, size_t size);
std::string to_hex(const void* data, size_t size);
// Parses lowercase or uppercase hex; error on odd length or a non-hex character.
Result<std::string> from_hex(const std::string& hex);

}  // namespace kolo
