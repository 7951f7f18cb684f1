// store/redis/cluster.cc: key slots, the slot map and redirects of Redis Cluster (cluster.h).
#include "store/redis/cluster.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

namespace rk::store::redis {

std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte << 8);
    for (int i = 0; i < 8; ++i) crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

std::uint16_t key_slot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & (kSlots - 1);
}

std::vector<SlotRange> slot_ranges(const Reply& reply, const Endpoint& asked) {
  std::vector<SlotRange> out;
  for (const Reply& range : reply.elements) {
    if (range.type != Reply::Type::kArray || range.elements.size() < 3) continue;
    const Reply& primary = range.elements[2];
    if (primary.type != Reply::Type::kArray || primary.elements.size() < 2) continue;
    const std::int64_t lo = std::max<std::int64_t>(0, range.elements[0].integer);
    const std::int64_t hi = std::min<std::int64_t>(kSlots - 1, range.elements[1].integer);
    std::string host = primary.elements[0].str;
    if (host.empty() || host == "?") host = asked.host;
    Endpoint e{host, static_cast<std::uint16_t>(primary.elements[1].integer)};
    if (lo <= hi) out.push_back({static_cast<std::size_t>(lo), static_cast<std::size_t>(hi), std::move(e)});
  }
  return out;
}

std::optional<Redirect> parse_redirect(std::string_view error) {
  Redirect r;
  r.ask = error.starts_with("ASK ");
  if (!r.ask && !error.starts_with("MOVED ")) return std::nullopt;
  const auto sp1 = error.find(' '), sp2 = error.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return std::nullopt;
  try {
    r.to = parse_endpoint(error.substr(sp2 + 1), "a redirect");
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  const std::string_view slot = error.substr(sp1 + 1, sp2 - sp1 - 1);
  int v = -1;
  const auto [p, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), v);
  if (ec != std::errc{}) {
    if (!r.ask) return std::nullopt;  // a MOVED must say which slot moved
  } else if (v >= 0 && v < static_cast<int>(kSlots)) {
    r.slot = v;
  }
  return r;
}

}  // namespace rk::store::redis
