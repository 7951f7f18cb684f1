// store/remote/shared_counters.h: per key, every server's cumulative count of hits and one server's snapshot of the
// key's state, in a store outside the process: what `sharing: batched` domains share (store/batched/batcher.h).
// The store knows no algorithm: a count is a number, a snapshot opaque bytes.
//
//   counters.sync({{.key = "rk:...:k", .add = 12, .ttl = 2s}}, [](std::vector<CounterReply> r) { ... });
//
// Thread safety: every member may be called from any thread; `done` runs once, on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ratekeeper/units.h"

namespace rk::store::remote {

struct CounterSync {
  std::string key;                      // the store key, as RemoteOp's
  std::uint64_t add = 0;                // this server's hits since its last sync of the key
  Nanos ttl{0};                         // how long the key's counters and snapshot outlive this sync
  bool want_snapshot = false;           // answer the snapshot too
  std::optional<std::string> snapshot;  // replace the snapshot with this
};

struct CounterReply {
  bool ok = false;  // false: not reached or refused (`error`); the sync may or may not have counted
  std::string error;
  std::vector<std::pair<std::string, std::uint64_t>> counts;  // server id -> cumulative hits, this server's included
  std::string snapshot;                                       // empty: none, or not asked
};

class SharedCounters {
 public:
  virtual ~SharedCounters() = default;
  // This server's id among the counters: random, chosen at start.
  virtual const std::string& server_id() const = 0;
  // One reply per op, in order; the ops go out together (one pipeline per node).
  virtual void sync(std::vector<CounterSync> ops, std::function<void(std::vector<CounterReply>)> done) = 0;
  // Forgets the keys' counters and snapshots.
  virtual void reset(std::vector<std::string> keys, std::function<void()> done) = 0;
  // Fails what is in flight and stops; later calls fail at once.
  virtual void close() = 0;
};

}  // namespace rk::store::remote
