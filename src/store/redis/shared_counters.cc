// store/redis/shared_counters.cc: the shared counters of `sharing: batched` in Redis (shared_counters.h).
#include "store/redis/shared_counters.h"

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>

#include "base/hex.h"
#include "store/redis/client.h"
#include "store/redis/lua_script.h"
#include "store/redis/shared_counters_lua.h"

namespace rk::store::redis {

namespace {

std::string random_id() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return base::hex16(v);
}

// A whole count as Redis keeps it (a signed 64-bit integer in decimal); nullopt for anything else.
std::optional<std::uint64_t> count_of(const Reply& r) {
  if (r.type == Reply::Type::kInteger) return r.integer >= 0 ? std::optional<std::uint64_t>(r.integer) : std::nullopt;
  if (r.str.empty() || r.str.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : r.str) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

store::remote::CounterReply to_reply(const Result& r) {
  store::remote::CounterReply out;
  if (const auto* e = std::get_if<Error>(&r)) {
    out.error = e->message;
    return out;
  }
  const Reply& reply = std::get<Reply>(r);
  if (reply.type != Reply::Type::kArray || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::kArray || reply.elements[0].elements.size() % 2 != 0) {
    out.error = "the shared counters script answered an unexpected shape";
    return out;
  }
  const auto& flat = reply.elements[0].elements;
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) {
    const auto n = count_of(flat[i + 1]);
    if (!n) continue;  // not one of ours: ignored rather than trusted
    out.counts.emplace_back(flat[i].str, *n);
  }
  out.snapshot = reply.elements[1].str;
  out.ok = true;
  return out;
}

class RedisSharedCounters final : public store::remote::SharedCounters {
 public:
  explicit RedisSharedCounters(const RedisRemoteOptions& o)
      : id_(random_id()), client_(client_options(o)), script_(client_, std::string(lua::kSharedCounters)) {}
  ~RedisSharedCounters() override { close(); }

  const std::string& server_id() const override { return id_; }

  void sync(std::vector<store::remote::CounterSync> ops,
            std::function<void(std::vector<store::remote::CounterReply>)> done) override {
    struct Batch {
      std::vector<store::remote::CounterReply> replies;
      std::atomic<std::size_t> left;
      std::function<void(std::vector<store::remote::CounterReply>)> done;
    };
    if (ops.empty()) return done({});
    auto batch = std::make_shared<Batch>();
    batch->replies.resize(ops.size());
    batch->left = ops.size();
    batch->done = std::move(done);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      store::remote::CounterSync& op = ops[i];
      const auto ttl_ms = std::max<std::int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(op.ttl).count());
      std::vector<std::string> args{id_, std::to_string(op.add), std::to_string(ttl_ms), op.want_snapshot ? "1" : "0"};
      if (op.snapshot) args.push_back(std::move(*op.snapshot));
      script_.eval({counters_key(op.key), snapshot_key(op.key)}, std::move(args), [batch, i](Result r) {
        batch->replies[i] = to_reply(r);
        if (batch->left.fetch_sub(1, std::memory_order_acq_rel) == 1) batch->done(std::move(batch->replies));
      });
    }
  }

  void reset(std::vector<std::string> keys, std::function<void()> done) override {
    if (keys.empty()) return done();
    auto left = std::make_shared<std::atomic<std::size_t>>(keys.size());
    auto shared_done = std::make_shared<std::function<void()>>(std::move(done));
    for (const std::string& k : keys) {
      const std::string ck = counters_key(k);
      client_.exec({"DEL", ck, snapshot_key(k)}, ck, [left, shared_done](const Result&) {
        if (left->fetch_sub(1, std::memory_order_acq_rel) == 1) (*shared_done)();
      });
    }
  }

  void close() override { client_.close(); }

 private:
  const std::string id_;
  Client client_;
  Script script_;
};

}  // namespace

// One tag for both, "{b:<tag>}", so that a Cluster keeps them in one slot, as the script needs; "b:" keeps it apart
// from an exact key's tag (hex digits alone) and a packed hash's.
std::string counters_key(const std::string& store_key) { return tagged_key(store_key, "b:", "c"); }
std::string snapshot_key(const std::string& store_key) { return tagged_key(store_key, "b:", "s"); }

std::shared_ptr<store::remote::SharedCounters> make_redis_shared_counters(const RedisRemoteOptions& options) {
  return std::make_shared<RedisSharedCounters>(options);
}

}  // namespace rk::store::redis
