#include "base/crc32c.h"

#include <array>
#include <cstring>

namespace rk::base {

namespace {

constexpr std::uint32_t kPoly = 0x82F63B78u;  // 0x1EDC6F41 reflected

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}

constexpr std::array<std::uint32_t, 256> kTable = make_table();

std::uint32_t by_table(const unsigned char* p, std::size_t n, std::uint32_t c) {
  for (std::size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
[[gnu::target("sse4.2")]] std::uint32_t by_instruction(const unsigned char* p, std::size_t n, std::uint32_t c) {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = __builtin_ia32_crc32di(c64, w);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; n > 0; --n, ++p) c = __builtin_ia32_crc32qi(c, *p);
  return c;
}

bool have_instruction() {
  static const bool yes = (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"));
  return yes;
}
#endif

}  // namespace

std::uint32_t crc32c(std::string_view data, std::uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const std::uint32_t c = ~crc;
#if defined(__x86_64__)
  if (have_instruction()) return ~by_instruction(p, data.size(), c);
#endif
  return ~by_table(p, data.size(), c);
}

}  // namespace rk::base
