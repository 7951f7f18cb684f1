// store/redis/cluster.h: what Redis Cluster says about where a key lives: its slot (CRC16 of the key or of its
// {hash tag}), the slot map CLUSTER SLOTS answers, and the MOVED and ASK redirects. Pure functions: the client
// (routing.cc) keeps the map and follows the redirects.
//
//   rk::store::redis::key_slot("{user1000}.following");       // == key_slot("{user1000}.followers")
//   for (const SlotRange& r : slot_ranges(reply, asked)) ...  // from CLUSTER SLOTS
//   if (auto to = parse_redirect("MOVED 3999 127.0.0.1:6381")) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "store/redis/resp.h"
#include "store/redis/url.h"

namespace rk::store::redis {

inline constexpr std::size_t kSlots = 16384;

// Redis Cluster's key slot: CRC16 (XMODEM) of the key, or of its first non-empty {hash tag}, mod 16384.
std::uint16_t key_slot(std::string_view key);
std::uint16_t crc16(std::string_view data);

// Slots lo..hi (within 0..16383) are served by `primary`.
struct SlotRange {
  std::size_t lo = 0, hi = 0;
  Endpoint primary;
};
// The ranges of a CLUSTER SLOTS reply, whose malformed entries are skipped; a primary named without a host (empty
// or "?") is the node that was asked.
std::vector<SlotRange> slot_ranges(const Reply& reply, const Endpoint& asked);

struct Redirect {
  bool ask = false;  // ASK: this command once, after ASKING; MOVED: the slot has moved for good
  int slot = -1;     // MOVED: the slot, if it is one
  Endpoint to;
};
// A MOVED or ASK error's redirect ("MOVED 3999 127.0.0.1:6381"), or nullopt for any other error.
std::optional<Redirect> parse_redirect(std::string_view error);

}  // namespace rk::store::redis
