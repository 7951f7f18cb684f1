// store/redis/remote.cc: the remote store over Redis: each decision one script, resets (remote.h); the near cache
// in front of it is near_cache.h's.
#include "store/redis/remote.h"

#include <array>
#include <charconv>
#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "base/hex.h"
#include "core/numeric.h"
#include "core/registry.h"
#include "base/hash.h"
#include "store/redis/client.h"
#include "store/redis/near_cache.h"
#include "store/redis/lua_script.h"
#include "store/redis/algorithm_scripts.h"
#include "store/redis/leases_lua.h"
#include "library/random_id.h"
#include "library/reservations.h"

namespace rk::store::redis {

namespace {

// A packed key's reset: its field, and its own key (KEYS as redis_keys gives them). Rare (the admin API), so EVAL.
constexpr std::string_view kResetPacked =
    "return redis.call('HDEL', KEYS[1], string.sub(KEYS[2], #KEYS[1] + 1)) + redis.call('DEL', KEYS[2])";

// A fixed seed, the same in every server of a fleet: they must all find a key in the same hash. Anyone can thus
// compute keys that share a hash; a hash takes at most kPackedFields of them, the rest get keys of their own.
constexpr std::uint64_t kPackSeed = 0x72617465'6b656570;  // "ratekeep"
// tagged_key's digest: fixed too, as every server must name a key alike. Not secret: someone who knows a rule's
// hash can still search for values of one slot (about 16 384 tries each), as for any Cluster key.
constexpr std::uint64_t kTagSeed = 0x726b2d73'6c6f7473;  // "rk-slots"
// A packed hash's tag, n in hex, has at most 6 digits: never an unpacked key's tag.
static_assert(kMaxPackedHashes - 1 <= 0xffffff && kTagDigits > 6);

// One decision's reply, as the strings decode_reply() takes.
std::vector<std::string> flatten(const store::redis::Reply& reply) {
  std::vector<std::string> out;
  for (const store::redis::Reply& e : reply.elements) {
    switch (e.type) {
      case store::redis::Reply::Type::kInteger: out.push_back(std::to_string(e.integer)); break;
      case store::redis::Reply::Type::kNil: out.emplace_back(); break;
      default: out.push_back(e.str); break;
    }
  }
  return out;
}

// An error instead of a reply, into `out` (a RemoteResult or a LeaseResult): Redis answered and refused this script
// (a foreign value in the key, say), and only this call fails (kError); any other error means Redis was not reached
// or did not answer in time (kUnavailable). False for a reply.
template <class Out>
bool error_of(const store::redis::Result& r, Out& out) {
  const auto* e = std::get_if<store::redis::Error>(&r);
  if (e == nullptr) return false;
  out.status = e->kind == store::redis::Error::Kind::kServer ? store::remote::RemoteResult::Status::kError
                                                             : store::remote::RemoteResult::Status::kUnavailable;
  out.error = e->message;
  return true;
}

store::remote::RemoteResult to_result(const store::redis::Result& r) {
  store::remote::RemoteResult out;
  if (error_of(r, out)) return out;
  const store::redis::Reply& reply = std::get<store::redis::Reply>(r);
  if (reply.type != store::redis::Reply::Type::kArray) {
    out.status = store::remote::RemoteResult::Status::kError;
    out.error = "the decision script answered something other than an array";
    return out;
  }
  const std::vector<std::string> fields = flatten(reply);
  auto decoded = store::redis::decode_reply(fields);
  if (auto* msg = std::get_if<std::string>(&decoded)) {
    out.status = store::remote::RemoteResult::Status::kError;
    out.error = *msg;
    return out;
  }
  out.status = store::remote::RemoteResult::Status::kOk;
  out.decision = std::get<Decision>(decoded);
  return out;
}

// The lease script's reply (lua/leases.lua): {done, in_flight, retry_after_us} or {done}.
store::remote::LeaseResult to_lease_result(const store::redis::Result& r) {
  store::remote::LeaseResult out;
  if (error_of(r, out)) return out;
  const store::redis::Reply& reply = std::get<store::redis::Reply>(r);
  if (reply.type != store::redis::Reply::Type::kArray || reply.elements.empty() ||
      reply.elements[0].type != store::redis::Reply::Type::kInteger) {
    out.status = store::remote::RemoteResult::Status::kError;
    out.error = "the lease script answered something other than an array of integers";
    return out;
  }
  out.status = store::remote::RemoteResult::Status::kOk;
  out.done = reply.elements[0].integer == 1;
  if (reply.elements.size() >= 3) {
    out.in_flight = static_cast<std::uint32_t>(reply.elements[1].integer);
    out.retry_after = std::chrono::microseconds(reply.elements[2].integer);
  }
  return out;
}

// The reservation script's reply (lua/reservations.lua): a reserve's decision; a settle's {0} (not settled), or its
// decision and the estimate.
store::remote::ReservationResult to_reservation_result(const store::redis::Result& r, bool settle) {
  store::remote::ReservationResult out;
  if (error_of(r, out)) return out;
  const store::redis::Reply& reply = std::get<store::redis::Reply>(r);
  out.status = store::remote::RemoteResult::Status::kError;
  if (reply.type != store::redis::Reply::Type::kArray) {
    out.error = "the reservation script answered something other than an array";
    return out;
  }
  std::vector<std::string> fields = flatten(reply);
  if (settle && fields.size() == 1 && fields[0] == "0") {
    out.status = store::remote::RemoteResult::Status::kOk;
    return out;
  }
  std::uint64_t reserved = 0;
  if (settle) {
    const std::string last = fields.empty() ? std::string() : fields.back();
    const auto [p, ec] = std::from_chars(last.data(), last.data() + last.size(), reserved);
    if (fields.size() != 6 || ec != std::errc{} || p != last.data() + last.size()) {
      out.error = "the settle script's reply is neither {0} nor a decision and an estimate";
      return out;
    }
    fields.pop_back();
  }
  auto decoded = store::redis::decode_reply(fields);
  if (auto* msg = std::get_if<std::string>(&decoded)) {
    out.error = *msg;
    return out;
  }
  out.status = store::remote::RemoteResult::Status::kOk;
  out.decision = std::get<Decision>(decoded);
  out.done = settle || out.decision.allowed;
  out.reserved = reserved;
  return out;
}

// Thread safety: decide() and reset() from any thread; replies arrive on the client's thread. The near cache keeps
// its own lock (near_cache.h).
class RedisRemote final : public store::remote::RemoteStore {
 public:
  explicit RedisRemote(const RedisRemoteOptions& o) : options_(o), client_(client_options(o)) {
    for (Algorithm a : kAllAlgorithms) {
      const store::redis::ScriptSource& s = store::redis::script_for(a);
      scripts_[static_cast<std::size_t>(a)] = std::make_unique<store::redis::Script>(
          client_, std::string(s.source),
          store::redis::FunctionSource{std::string(s.library), std::string(s.function)});
      const store::redis::ScriptSource& r = store::redis::reservation_script_for(a);
      reservations_[static_cast<std::size_t>(a)] = std::make_unique<store::redis::Script>(
          client_, std::string(r.source),
          store::redis::FunctionSource{std::string(r.library), std::string(r.function)});
    }
    if (options_.near_cache) {
      near_ = std::make_unique<NearCache>(
          options_.near_cache_keys, options_.near_cache_flush,
          [this](const LimitSpec& spec, const std::string& key, Nanos at, std::uint64_t hits) {
            send(spec, key, at, hits, false, [](const store::redis::Result&) {});
          });
    }
  }
  ~RedisRemote() override { close(); }

  void decide(std::vector<store::remote::RemoteOp> ops, Nanos now,
              std::function<void(std::vector<store::remote::RemoteResult>)> done) override {
    struct Batch {
      std::vector<store::remote::RemoteResult> results;
      std::atomic<std::size_t> left;
      std::function<void(std::vector<store::remote::RemoteResult>)> done;
    };
    if (ops.empty()) return done({});
    auto batch = std::make_shared<Batch>();
    batch->results.resize(ops.size());
    batch->left = ops.size() + 1;  // + 1: this function's own pass, so that local answers cannot finish it early
    batch->done = std::move(done);
    auto one_done = [batch] {
      if (batch->left.fetch_sub(1, std::memory_order_acq_rel) == 1) batch->done(std::move(batch->results));
    };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      store::remote::RemoteOp& op = ops[i];
      if (near_ && !op.peek && near_->answer(op, now, batch->results[i])) {
        one_done();
        continue;
      }
      const bool learn = near_ && !op.peek;
      std::string key = learn ? op.key : std::string();
      send(*op.spec, std::move(op.key), now, op.hits, op.peek,
           [this, batch, i, one_done, learn, key = std::move(key), spec = *op.spec, hits = op.hits,
            now](store::redis::Result r) {
             batch->results[i] = to_result(r);
             if (learn) near_->learn(key, spec, hits, now, batch->results[i]);
             one_done();
           });
    }
    one_done();
  }

  void flush() override {
    if (near_) near_->flush();
  }

  void reset(std::vector<std::string> keys, std::function<void(std::vector<std::optional<bool>>)> done) override {
    struct Batch {
      std::vector<std::optional<bool>> existed;
      std::atomic<std::size_t> left;
      std::function<void(std::vector<std::optional<bool>>)> done;
    };
    if (keys.empty()) return done({});
    auto batch = std::make_shared<Batch>();
    batch->existed.resize(keys.size());
    batch->left = keys.size();
    batch->done = std::move(done);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      std::vector<std::string> rkeys = redis_keys(keys[i], options_.packed_hashes);
      const std::string routing = rkeys[0];
      // Packed: the field (HDEL) and the own key (DEL) in one script, the state being in one or the other.
      std::vector<std::string> cmd = rkeys.size() == 1
                                         ? std::vector<std::string>{"DEL", std::move(rkeys[0])}
                                         : std::vector<std::string>{"EVAL", std::string(kResetPacked), "2",
                                                                    std::move(rkeys[0]), std::move(rkeys[1])};
      client_.exec(std::move(cmd), routing, [batch, i](store::redis::Result r) {
        if (const auto* reply = std::get_if<store::redis::Reply>(&r);
            reply && reply->type == store::redis::Reply::Type::kInteger) {
          batch->existed[i] = reply->integer > 0;
        }
        if (batch->left.fetch_sub(1, std::memory_order_acq_rel) == 1) batch->done(std::move(batch->existed));
      });
    }
  }

  void acquire_lease(std::string key, std::string id, std::uint32_t max_in_flight, Nanos lease_ttl, Nanos now,
                     std::function<void(store::remote::LeaseResult)> done) override {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(lease_ttl).count();
    leases_.eval({redis_key(key)},
                 {"acquire", std::move(id), now_arg(now), std::to_string(max_in_flight), std::to_string(us)},
                 [done = std::move(done)](store::redis::Result r) { done(to_lease_result(r)); });
  }

  void release_lease(std::string key, std::string id, Nanos now,
                     std::function<void(store::remote::LeaseResult)> done) override {
    leases_.eval({redis_key(key)}, {"release", std::move(id), now_arg(now)},
                 [done = std::move(done)](store::redis::Result r) { done(to_lease_result(r)); });
  }

  // Each one script in Redis (lua/reservations.lua), by the time decisions take. Neither asks the near cache (a
  // reserve it answered could not be held); a settle that leaves the key allowing makes it forget the key (unless
  // hits refused there wait to be sent), so that a refund is seen at once. An overdraw's refusal is not learnt: it
  // was the debit's, not an attempt's of some cost.
  void reserve(const LimitSpec* spec, std::string key, std::string id, std::uint64_t estimate, Nanos ttl, Nanos now,
               std::function<void(store::remote::ReservationResult)> done) override {
    std::string bad = spec == nullptr ? "no limit given" : library::amount_error("estimate", estimate);
    if (bad.empty()) bad = library::ttl_error(ttl);
    if (bad.empty() && !library::random_id_shaped(id)) bad = "id: not 32 hex digits";
    if (!bad.empty()) return done({store::remote::RemoteResult::Status::kError, false, 0, {}, bad});
    eval_reservation(*spec, key, id, store::redis::reserve_args(*spec, time_arg(now), estimate, ttl), false,
                     std::move(done));
  }

  void settle(const LimitSpec* spec, std::string key, std::string id, std::uint64_t actual, Nanos now,
              std::function<void(store::remote::ReservationResult)> done) override {
    if (std::string bad = spec == nullptr ? "no limit given" : library::amount_error("actual", actual); !bad.empty()) {
      return done({store::remote::RemoteResult::Status::kError, false, 0, {}, bad});
    }
    // An id of another shape names no reservation: not settled, nothing asked (as in memory).
    if (!library::random_id_shaped(id)) return done({store::remote::RemoteResult::Status::kOk, false, 0, {}, ""});
    if (near_) {
      done = [this, key, spec = *spec, now, done = std::move(done)](store::remote::ReservationResult r) {
        if (r.status == store::remote::RemoteResult::Status::kOk && r.done && r.decision.allowed) {
          near_->learn(key, spec, 0, now, {store::remote::RemoteResult::Status::kOk, r.decision, ""});
        }
        done(std::move(r));
      };
    }
    eval_reservation(*spec, key, id, store::redis::settle_args(*spec, time_arg(now), actual), true, std::move(done));
  }

  std::string describe() const override { return client_.describe(); }
  // The client fails a node's commands at once while that node is backing off (after a refused connection or a
  // timeout): a breaker per node. One for the whole store is for a single server.
  bool wants_breaker() const override {
    return !options_.url.starts_with("redis+cluster://") && !options_.url.starts_with("rediss+cluster://");
  }
  std::uint64_t tls_failures() const override { return client_.stats().tls_failures; }
  Spins spins() const override {
    const auto s = client_.stats();
    return {.answered = s.spins_answered, .idle = s.spins_idle};
  }
  void close() override {
    if (near_) near_->close();  // its flusher sends through the client
    client_.close();
  }

 private:
  void send(const LimitSpec& spec, const std::string& key, Nanos now, std::uint64_t hits, bool peek,
            std::function<void(store::redis::Result)> done) {
    const store::redis::Script& script = *scripts_[static_cast<std::size_t>(spec.algorithm)];
    script.eval(redis_keys(key, options_.packed_hashes), store::redis::script_args(spec, time_arg(now), hits, peek),
                std::move(done));
  }

  std::optional<Nanos> time_arg(Nanos now) const {
    return options_.caller_clock ? std::optional<Nanos>(now) : std::nullopt;
  }

  void eval_reservation(const LimitSpec& spec, const std::string& key, const std::string& id,
                        std::vector<std::string> args, bool settle,
                        std::function<void(store::remote::ReservationResult)> done) {
    std::vector<std::string> keys = redis_keys(key, options_.packed_hashes);
    keys.push_back(reservation_key(key, id, options_.packed_hashes));
    reservations_[static_cast<std::size_t>(spec.algorithm)]->eval(
        std::move(keys), std::move(args),
        [settle, done = std::move(done)](store::redis::Result r) { done(to_reservation_result(r, settle)); });
  }

  // The lease script's time: the caller's in whole microseconds, or "" for Redis's TIME.
  std::string now_arg(Nanos now) const {
    return options_.caller_clock ? std::to_string(now.count() / 1000) : std::string();
  }

  RedisRemoteOptions options_;
  store::redis::Client client_;
  store::redis::Script leases_{client_, std::string(lua::kLeases)};
  std::array<std::unique_ptr<store::redis::Script>, std::size(kAllAlgorithms)> scripts_;
  std::array<std::unique_ptr<store::redis::Script>, std::size(kAllAlgorithms)> reservations_;
  std::unique_ptr<NearCache> near_;  // with options_.near_cache; last: its flusher starts once the rest is built
};

}  // namespace

std::string tagged_key(std::string_view store_key, std::string_view lead, std::string_view suffix) {
  constexpr std::string_view kPrefix = "rk:";
  // 32 bits: the CRC-16 of 8 hex digits gives every slot within 0.2% of an even share (of 4 digits, only 80% of the
  // slots at all). After "rk:", so that "rk:*", a SCAN's or an ACL's pattern, still covers every key.
  const auto digest = static_cast<std::uint32_t>(base::hash_key(store_key, kTagSeed));
  const bool ours = store_key.starts_with(kPrefix);
  if (ours) store_key.remove_prefix(kPrefix.size());
  std::string out;
  out.reserve(kPrefix.size() + lead.size() + kTagDigits + 2 + store_key.size() + suffix.size());
  if (ours) out += kPrefix;
  out += '{';
  out += lead;
  out.append(base::hex16(digest), 16 - kTagDigits, kTagDigits);
  out += '}';
  out += store_key;
  out += suffix;
  return out;
}

std::string redis_key(std::string_view store_key) { return tagged_key(store_key); }

std::vector<std::string> redis_keys(std::string_view store_key, std::uint32_t packed_hashes) {
  constexpr std::string_view kPrefix = "rk:";
  // Only the service's keys ("rk:..."): another key's field could be the same as one of theirs.
  if (packed_hashes == 0 || !store_key.starts_with(kPrefix)) return {redis_key(store_key)};
  const std::string_view field = store_key.substr(kPrefix.size());
  if (field.size() > kPackedFieldBytes || field.empty()) return {redis_key(store_key)};
  // The hash's number from the high bits of the product (Lemire's multiply-shift: no division, no modulo bias).
  const std::uint64_t h = base::hash_key(store_key, kPackSeed);
  const auto n = static_cast<std::uint64_t>((static_cast<core::u128>(h) * packed_hashes) >> 64);
  char hex[24];
  const int len = std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(n));
  std::string hash;
  hash.reserve(kPrefix.size() + 2 + static_cast<std::size_t>(len));
  hash.append(kPrefix).append("{").append(hex, static_cast<std::size_t>(len)).append("}");
  std::string own = hash;
  own.append(field);
  return {std::move(hash), std::move(own)};
}

std::string reservation_key(std::string_view store_key, std::string_view id, std::uint32_t packed_hashes) {
  std::string k = redis_keys(store_key, packed_hashes).back();
  k.insert(k.find('{'), 1, 'r');
  k += ':';
  k += id;
  return k;
}

ClientOptions client_options(const RedisRemoteOptions& o) {
  if (o.connections < 1 || o.connections > 64) {
    throw std::invalid_argument("connections per Redis node is " + std::to_string(o.connections) +
                                "; it must be from 1 to 64");
  }
  ClientOptions c = ClientOptions::parse_url(o.url);
  c.command_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout);
  c.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.connect_timeout);
  c.connections_per_node = o.connections;
  c.spin = o.spin;
  c.tls_files = o.tls;
  c.password_file = o.password_file;
  return c;
}

std::shared_ptr<store::remote::RemoteStore> make_redis_remote(const RedisRemoteOptions& options) {
  if (options.packed_hashes > kMaxPackedHashes) {
    throw std::invalid_argument("packed hashes is " + std::to_string(options.packed_hashes) +
                                "; it must be from 0 "
                                "(off) to " +
                                std::to_string(kMaxPackedHashes));
  }
  return std::make_shared<RedisRemote>(options);
}

}  // namespace rk::store::redis
