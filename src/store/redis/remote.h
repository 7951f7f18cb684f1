// store/redis/remote.h: the remote store of `ratekeeper serve --redis URL`: each decision one Lua script in
// Redis (src/store/redis/lua/), sent through our pipelining RESP client (src/store/redis/client.h).
//
//   auto store = rk::store::redis::make_redis_remote({.url = "redis://127.0.0.1:6379"});  // throws on a bad URL
//   rk::service::Service service(reloader, clock, {.remote = store});
//
// Thread safety: as store::remote::RemoteStore. Destroying the store fails what is still in flight (as unavailable) and
// joins its threads; destroy it after the servers that wait on its answers have stopped.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/url.h"
#include "store/remote/remote_store.h"

namespace rk::store::redis {

struct RedisRemoteOptions {
  std::string url;                                 // redis://, redis+cluster://, redis+sentinel:// (rediss...)
  TlsOptions tls;                                  // for rediss URLs (url.h): --redis-tls-ca, ...
  std::string password_file;                       // --redis-password-file: wins over the URL's password
  bool caller_clock = false;                       // true: the caller's time; false: Redis's own TIME
  Nanos timeout = std::chrono::milliseconds(100);  // per command, after which the decision falls back
  Nanos connect_timeout = std::chrono::milliseconds(500);
  int connections = 2;                // per Redis node
  std::chrono::microseconds spin{0};  // --redis-spin: ClientOptions::spin (url.h)
  // Near cache: once Redis refuses a key until a known time, attempts (of at least the same cost) before then are
  // refused here without a round trip; where refused attempts count (earrrl; fixed_window with count_refused),
  // their hits go to Redis in one batch per key every `near_cache_flush`. Off by default: docs/redis.md says what
  // it can change.
  bool near_cache = false;
  Nanos near_cache_flush = std::chrono::milliseconds(50);
  std::size_t near_cache_keys = 100'000;  // at most; a full cache takes no new keys
  // --redis-packed-hashes: 0 (default), a key of its own per limited key; N, the states of limited keys packed into
  // N Redis hashes (redis_keys below). docs/redis.md ("Packed states") says what it saves and what it changes.
  std::uint32_t packed_hashes = 0;
};
inline constexpr std::uint32_t kMaxPackedHashes = 1u << 24;

// Throws std::invalid_argument naming what is wrong with the URL or options (a TLS or password file: its flag, and
// the file).
std::shared_ptr<store::remote::RemoteStore> make_redis_remote(const RedisRemoteOptions& options);

// The client options these options make (the URL's, with the timeouts, connections, spin, TLS files and password
// file), for every client of Redis that --redis starts: the decisions' and the batched domains' alike. Throws
// std::invalid_argument for a bad URL or a number of connections outside 1-64.
ClientOptions client_options(const RedisRemoteOptions& options);

// A Redis key of a store key: "rk:{<lead><tag>}<the store key after rk:><suffix>" ("{<lead><tag>}<store key>
// <suffix>" for a key not in "rk:", none of the service's). <tag> is kTagDigits hex digits, 32 bits of a digest of
// the whole store key. Redis Cluster places a key by its first {...}: ours comes first and holds no byte a client
// sent, so no value can end it early ("x}") or open another ("{x}"); and values whose CRC-16s agree, which a key
// hashed whole would put in one slot whatever rule they are under, spread like any others. The store key follows
// whole, so two store keys never share a Redis key. docs/redis.md gives the layout.
std::string tagged_key(std::string_view store_key, std::string_view lead = {}, std::string_view suffix = {});
inline constexpr std::size_t kTagDigits = 8;

// The Redis key of a store key ("rk:<rule hash>:<values>"), unpacked: tagged_key(store_key),
// "rk:{<tag>}<rule hash>:<values>".
std::string redis_key(std::string_view store_key);

// The Redis keys a store key's script is given: {redis_key(store_key)} unpacked (packed_hashes 0, a key not in "rk:",
// or one too long for a field); packed, {its hash, its own key}: "rk:{<n>}" for the n-th of packed_hashes hashes
// (n in hex, at most 6 digits: never an unpacked key's tag), chosen by a hash of the store key, and that name
// followed by the field, the store key after "rk:". The hash and the own key share one hash tag, so one Cluster slot.
std::vector<std::string> redis_keys(std::string_view store_key, std::uint32_t packed_hashes);

// The Redis key of the reservation `id` (32 hex digits) on a store key: its state's key (unpacked) or own key
// (packed, as redis_keys gives it) with `r` before the hash tag and `:<id>` after, "rk:r{<tag>}<rest>:<id>": in the
// state's Cluster slot, and, beginning "rk:r{" (or "r{"), never a state's or another record's key.
std::string reservation_key(std::string_view store_key, std::string_view id, std::uint32_t packed_hashes);

}  // namespace rk::store::redis
