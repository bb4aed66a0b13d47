#include "support/crypto.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace kolo {

Mac hmac_sha256(const std::string& key, const void* data, size_t size) {
  Mac mac{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       static_cast<const unsigned char*>(data), size, mac.data(), &length);
  return mac;
}

bool mac_equal(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

// The kernel's CSPRNG (getrandom(2), which OpenSSL seeds from too): OpenSSL's RAND_bytes
// spends about 3 ms of CPU setting up its generator on first use, in every rank's start-up.
Status random_bytes(void* out, size_t size) {
  auto* at = static_cast<unsigned char*>(out);
  while (size > 0) {
    const ssize_t got = ::getrandom(at, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return error(Code::kSystem, "getrandom failed: ", std::strerror(errno));
    }
    at += got;
    size -= static_cast<size_t>(got);
  }
  return Status();
}

std::string to_hex(const void* data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return error(Code::kInvalidArgument, "hex string has odd length ", hex.size());
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int high = hex_value(hex[2 * i]);
    int low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return error(Code::kInvalidArgument, "non-hex character at position ", 2 * i);
    out[i] = static_cast<char>(high << 4 | low);
  }
  return out;
}

}  // namespace kolo
