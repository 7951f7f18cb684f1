// fuzz/resp_fuzz.cc: the RESP reply parser (src/store/redis/resp.h), which reads whatever a Redis server, or
// anything that answers on its port, sends. The first byte picks how the rest is split into feeds, since the
// parser must give the same replies however the bytes arrive; tight limits make the bounds reachable.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "store/redis/resp.h"

namespace {

bool same(const rk::store::redis::Reply& a, const rk::store::redis::Reply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.elements.size() != b.elements.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.elements.size(); ++i) {
    if (!same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

// Every reply the parser yields for `bytes` fed `step` bytes at a time (0: all at once), and whether it failed.
std::vector<rk::store::redis::Reply> replies(std::string_view bytes, std::size_t step, bool& failed) {
  rk::store::redis::Parser p(rk::store::redis::ParserLimits{.max_bulk = 4096, .max_elements = 64, .max_depth = 4});
  std::vector<rk::store::redis::Reply> out;
  if (step == 0) step = bytes.size() + 1;
  for (std::size_t at = 0; at < bytes.size(); at += step) {
    p.feed(bytes.substr(at, step));
    while (auto r = p.next()) out.push_back(std::move(*r));
    if (p.failed()) break;
  }
  failed = p.failed();
  if (failed && p.error().empty()) __builtin_trap();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Past 64 KiB a reply line without its CRLF yet is refused, which depends on the split: stay below.
  if (size == 0 || size > 60'000) return 0;
  const std::size_t step = data[0] % 8;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  bool failed_whole = false, failed_split = false;
  const auto whole = replies(bytes, 0, failed_whole);
  const auto split = replies(bytes, step, failed_split);
  // Split feeds see the same replies, and a malformed input fails at the same reply either way.
  if (failed_whole != failed_split || whole.size() != split.size()) __builtin_trap();
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (!same(whole[i], split[i])) __builtin_trap();
  }
  return 0;
}
