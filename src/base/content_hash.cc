#include "base/content_hash.h"

#include <cstdint>

#include "base/hex.h"

namespace rk::base {

std::string content_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64's offset basis and prime
  for (const unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return hex16(h);
}

}  // namespace rk::base
