// store/redis/shared_counters.h: store::remote::SharedCounters in Redis: per key a hash of every server's cumulative
// hits and a snapshot string beside it (same hash tag, so one Cluster slot), both kept by one algorithm-agnostic script
// (lua/shared_counters.lua) per key per sync; a sync's keys go out in one pipeline per node.
//
//   auto counters = rk::store::redis::make_redis_shared_counters({.url = "redis://127.0.0.1:6379"});
//
// Thread safety: as store::remote::SharedCounters.
#pragma once

#include <memory>
#include <string>

#include "store/redis/remote.h"
#include "store/remote/shared_counters.h"

namespace rk::store::redis {

// Its own connections (options.connections per node); url, timeouts and connections as the remote store's.
std::shared_ptr<store::remote::SharedCounters> make_redis_shared_counters(const RedisRemoteOptions& options);

// The Redis keys of a store key's counters and snapshot, "rk:{b:<tag>}<rule hash>:<values>c" and "...s"
// (tagged_key, remote.h): one hash tag for both, so that they share a Cluster slot, which no value can choose; never
// an exact-sharing key's name.
std::string counters_key(const std::string& store_key);
std::string snapshot_key(const std::string& store_key);

}  // namespace rk::store::redis
