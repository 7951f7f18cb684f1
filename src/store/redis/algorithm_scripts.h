// store/redis/algorithm_scripts.h: each algorithm as one Lua script run in Redis (src/store/redis/lua/), its arguments
// and its reply, so that a decision in Redis is the same as in the in-process store (src/core/), to the nanosecond.
//
//   const auto& s = rk::store::redis::script_for(rk::Algorithm::kEarrrl);
//   rk::store::redis::Script script(client, std::string(s.source), {std::string(s.library), std::string(s.function)});
//   script.eval({key}, rk::store::redis::script_args(spec, now, 1, false), ...);
//   auto d = rk::store::redis::decode_reply(elements);  // Decision, or an error message
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ratekeeper/decision.h"
#include "ratekeeper/params.h"

namespace rk::store::redis {

struct ScriptSource {
  std::string_view name;      // "earrrl", ...
  std::string_view source;    // the whole Lua text, an EVAL script: prelude.lua, then the algorithm's own files
  std::string_view library;   // the same as a library for FUNCTION LOAD (Redis 7.0 on), registering `function`
  std::string_view function;  // "rk_earrrl_<16 hex digits>": the FCALL name, its hex digits the text's hash
};
const ScriptSource& script_for(Algorithm algorithm);
// The algorithm's reserve and settle (lua/reservations.lua after the algorithm's file): a script and a function
// ("rk_<name>_reserve_<16 hex digits>") of their own, so that a decision's call is what it was without them.
const ScriptSource& reservation_script_for(Algorithm algorithm);

// The packed layout (--redis-packed-hashes; docs/redis.md, "Packed states"): a hash holds at most kPackedFields
// fields, each a state of at most kPackedValueBytes bytes after its 5-byte expiry; a key whose field (its name after
// "rk:") is longer than kPackedFieldBytes keeps a key of its own, as unpacked. Within these, Redis keeps the hash
// as one listpack (its defaults: hash-max-listpack-entries 128, hash-max-listpack-value 64), a few bytes a field.
inline constexpr int kPackedFields = 64;
inline constexpr std::size_t kPackedFieldBytes = 64;
inline constexpr int kPackedValueBytes = 59;

// ARGV for one decision; `now` absent: the script calls Redis's TIME. The spec must be valid (rk::validate).
std::vector<std::string> script_args(const LimitSpec& spec, std::optional<Nanos> now, std::uint64_t cost, bool peek);

// ARGV for a reserve of `estimate` held `ttl`, and for a settle at `actual` (lua/reservations.lua): the spec's
// parameters with count_refused off for the reserve; for the settle, the spec's and then those with count_refused
// on, which an overdraw charges with.
std::vector<std::string> reserve_args(const LimitSpec& spec, std::optional<Nanos> now, std::uint64_t estimate,
                                      Nanos ttl);
std::vector<std::string> settle_args(const LimitSpec& spec, std::optional<Nanos> now, std::uint64_t actual);

// The script's reply elements as strings; the Decision, or a message naming what was wrong with the reply.
std::variant<Decision, std::string> decode_reply(std::span<const std::string> elements);

}  // namespace rk::store::redis
