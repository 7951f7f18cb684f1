#include "ratekeeper/limiter.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/algorithms.h"
#include "core/registry.h"
#include "core/state_codec.h"
#include "library/limiter_states.h"
#include "library/reservations.h"
#include "store/memory/sharded_store.h"

namespace rk {

namespace {

// Keys up to this length are stored as they are (no hashing on the hot path of addresses, ids and API keys);
// longer ones as their 16-byte keyed digest, so an attacker's long keys cost the store no more than short ones.
// A digest shares the space of 16-byte keys: a key equal to another's digest must guess a 128-bit PRF output.
constexpr std::size_t kDigestAbove = library::kMaxStoredKeyBytes;

// The key the store sees: `key` itself, or its digest written into `buf`.
[[gnu::always_inline]] inline std::string_view stored_key(std::string_view key, char (&buf)[16]) {
  if (key.size() <= kDigestAbove) [[likely]]
    return key;
  const base::Digest128 d = base::siphash128(key, base::process_digest_key());
  std::memcpy(buf, &d.lo, 8);
  std::memcpy(buf + 8, &d.hi, 8);
  return {buf, sizeof buf};
}

// What one key can hold on the heap at most, beyond its entry: a stored key over CompactKey's inline bytes (plus
// the allocator's header), and a sliding log's whole ring.
std::size_t per_key_heap(const LimitSpec& spec) {
  std::size_t bytes = kDigestAbove + 16;
  if (spec.algorithm == Algorithm::kSlidingLog) {
    bytes += core::SlidingLogState::max_heap_bytes(static_cast<std::uint64_t>(spec.limit), core::counts_refused(spec));
  }
  return bytes;
}

// The options with max_keys lowered until a full store's worst case fits max_memory_bytes; never below one key (a
// budget too small for one key is the caller's to notice in StoreStats::max_keys: rules files reload in the
// background, where a throw would have nowhere to go).
template <class State>
StoreOptions within_budget(StoreOptions o, const LimitSpec& spec) {
  if (o.max_memory_bytes == 0) return o;
  using Store = store::memory::ShardedStore<State>;
  const std::size_t heap = per_key_heap(spec);
  std::size_t lo = 1, hi = o.max_keys;  // the largest count that fits (or 1) lies in [lo, hi]
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (Store::worst_bytes(mid, o.shards, heap) <= o.max_memory_bytes) lo = mid;
    else hi = mid - 1;
  }
  o.max_keys = lo;
  return o;
}

}  // namespace

struct Limiter::Impl {
  Impl(const LimitSpec& s, std::shared_ptr<const Clock> c, std::size_t max_key, std::size_t max_reservations)
      : spec(s), clock(std::move(c)), max_key_bytes(max_key), reservations(max_reservations) {}
  virtual ~Impl() = default;
  virtual Decision check(std::string_view key, std::int64_t now, std::uint64_t cost) = 0;
  // check for a caller that reads no reset_after (Fields::kAllButResetAfter): a function of its own, so that
  // neither path tests a flag.
  virtual Decision check_brief(std::string_view key, std::int64_t now, std::uint64_t cost) = 0;
  // keys, costs and out of one size (costs[i] for each key), the longest key's size `longest` checked by check_size.
  virtual void check_many(const std::string_view* keys, const std::uint64_t* costs, std::size_t n, std::int64_t now,
                          Decision* out, bool brief, std::size_t longest) = 0;
  virtual Decision peek(std::string_view key, std::int64_t now, std::uint64_t cost) const = 0;
  // A reservation's check of its estimate: a refused one records nothing, whatever count_refused says (no work
  // follows it, and nobody settles it).
  virtual Decision reserve(std::string_view key, std::int64_t now, std::uint64_t estimate) = 0;
  // A reservation of `reserved` charged at `charged_at`, settled at `actual`, in one step on the key's state.
  virtual Decision settle(std::string_view key, std::int64_t now, std::uint64_t reserved, std::uint64_t actual,
                          const core::Charge& charge) = 0;
  virtual bool reset(std::string_view key) = 0;
  virtual std::size_t sweep(std::int64_t now) = 0;
  virtual StoreStats stats() const = 0;
  virtual void export_states(const library::StateVisitor& f) const = 0;
  virtual bool import_state(std::string_view key, std::string_view state, bool apply) = 0;

  void check_key(std::string_view key) const { check_size(key.size()); }
  void check_size(std::size_t size) const {
    if (size > max_key_bytes) [[unlikely]]
      refuse_key(size);
  }
  // Out of line, so that the test above is two instructions inlined in every check rather than a call.
  [[noreturn, gnu::noinline, gnu::cold]] void refuse_key(std::size_t size) const {
    throw InvalidArgument("key is " + std::to_string(size) + " bytes, above the limit of " +
                          std::to_string(max_key_bytes) + " (StoreOptions::max_key_bytes)");
  }

  LimitSpec spec;
  std::shared_ptr<const Clock> clock;
  std::size_t max_key_bytes;
  library::Reservations reservations;
};

namespace {

template <class Algo>
class Keyed final : public Limiter::Impl {
 public:
  Keyed(const LimitSpec& s, typename Algo::Params params, const StoreOptions& options, std::shared_ptr<const Clock> c)
      : Impl(s, std::move(c), options.max_key_bytes, options.max_keys),
        params_(params),
        debit_params_(params_with(s, true)),
        reserve_params_(params_with(s, false)),
        store_(within_budget<typename Algo::State>(options, s)) {}

  Decision check(std::string_view key, std::int64_t now, std::uint64_t cost) override {
    check_key(key);
    char buf[16];
    return store_.update(stored_key(key, buf),
                         [this, now, cost](typename Algo::State& s) { return Algo::decide(params_, s, now, cost); });
  }

  Decision check_brief(std::string_view key, std::int64_t now, std::uint64_t cost) override {
    check_key(key);
    char buf[16];
    return store_.update(stored_key(key, buf), [this, now, cost](typename Algo::State& s) {
      return Algo::decide_brief(params_, s, now, cost);
    });
  }

  void check_many(const std::string_view* keys, const std::uint64_t* costs, std::size_t n, std::int64_t now,
                  Decision* out, bool brief, std::size_t longest) override {
    if (brief) {
      check_many_with<Algo::decide_brief>(keys, costs, n, now, out, longest);
    } else {
      check_many_with<Algo::decide>(keys, costs, n, now, out, longest);
    }
  }

  // The flag tested once a batch, not once a key; the decision inlined into the store's loop. Keys all stored as
  // they are go to the store as given; otherwise a group at a time, with the long ones' digests.
  template <auto Decide>
  void check_many_with(const std::string_view* keys, const std::uint64_t* costs, std::size_t n, std::int64_t now,
                       Decision* out, std::size_t longest) {
    const typename Algo::Params& p = params_;
    auto deciding = [&p, now](Decision* to, const std::uint64_t* cost) {
      return [&p, now, to, cost ](std::size_t i, typename Algo::State & s) __attribute__((always_inline)) {
        to[i] = Decide(p, s, now, cost[i]);
      };
    };
    if (longest <= kDigestAbove) [[likely]] {
      store_.update_many(keys, n, deciding(out, costs));
      return;
    }
    constexpr std::size_t kAtOnce = 16;  // the store's group: digests of long keys are made this many at a time
    char buf[kAtOnce][16];
    std::string_view stored[kAtOnce];
    for (std::size_t base = 0; base < n; base += kAtOnce) {
      const std::size_t m = std::min(kAtOnce, n - base);
      for (std::size_t i = 0; i < m; ++i) stored[i] = stored_key(keys[base + i], buf[i]);
      store_.update_many(stored, m, deciding(out + base, costs + base));
    }
  }

  Decision peek(std::string_view key, std::int64_t now, std::uint64_t cost) const override {
    check_key(key);
    char buf[16];
    return store_.read(stored_key(key, buf), [&](const typename Algo::State* s) {
      typename Algo::State copy = s ? *s : typename Algo::State{};
      return Algo::decide(params_, copy, now, cost);
    });
  }

  Decision reserve(std::string_view key, std::int64_t now, std::uint64_t estimate) override {
    check_key(key);
    char buf[16];
    return store_.update(stored_key(key, buf),
                         [&](typename Algo::State& s) { return Algo::decide(reserve_params_, s, now, estimate); });
  }

  Decision settle(std::string_view key, std::int64_t now, std::uint64_t reserved, std::uint64_t actual,
                  const core::Charge& charge) override {
    check_key(key);
    char buf[16];
    return store_.update(stored_key(key, buf), [&](typename Algo::State& s) {
      if (actual > reserved) return Algo::decide(debit_params_, s, now, actual - reserved);
      Algo::refund(params_, s, now, reserved - actual, charge);
      return Algo::decide(params_, s, now, 0);
    });
  }

  bool reset(std::string_view key) override {
    char buf[16];
    return store_.erase(stored_key(key, buf));
  }

  std::size_t sweep(std::int64_t now) override {
    return store_.erase_if([&](const typename Algo::State& s) { return Algo::forgettable(params_, s, now); });
  }

  StoreStats stats() const override { return store_.stats(); }

  void export_states(const library::StateVisitor& f) const override {
    std::string bytes;
    store_.for_each([&](std::string_view key, const typename Algo::State& s) {
      bytes.clear();
      core::encode_state<Algo>(s, bytes);
      f(key, bytes);
    });
  }

  bool import_state(std::string_view key, std::string_view state, bool apply) override {
    typename Algo::State s;
    if (key.size() > kDigestAbove || !core::decode_state<Algo>(state, s) || !state.empty()) return false;
    if (apply) store_.update(key, [&](typename Algo::State& held) { held = std::move(s); });
    return true;
  }

 private:
  // The spec's parameters with count_refused set: with it, what a settle's overdraw is charged with, recorded even
  // past what is left (a debt, bounded as count_refused bounds it); without, what a reservation is checked with.
  static typename Algo::Params params_with(LimitSpec spec, bool count_refused) {
    spec.count_refused = count_refused;
    return core::with_algorithm(spec, []<class Other>(const typename Other::Params& p) {
      if constexpr (std::is_same_v<Other, Algo>) {
        return p;
      } else {
        return typename Algo::Params{};  // not reached: count_refused does not change the algorithm
      }
    });
  }

  typename Algo::Params params_;
  typename Algo::Params debit_params_;
  typename Algo::Params reserve_params_;
  store::memory::ShardedStore<typename Algo::State> store_;
};

std::unique_ptr<Limiter::Impl> make_impl(const LimitSpec& spec, const StoreOptions& o, std::shared_ptr<const Clock> c) {
  return core::with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) -> std::unique_ptr<Limiter::Impl> {
    return std::make_unique<Keyed<Algo>>(spec, p, o, std::move(c));
  });
}

void validate_options(const StoreOptions& o) {
  if (o.max_keys < 1) throw InvalidArgument("max_keys must be at least 1");
  if (o.max_keys > (std::size_t{1} << 40))
    throw InvalidArgument("max_keys " + std::to_string(o.max_keys) + " is absurd: at most 2^40");
  if (o.shards > 65536) throw InvalidArgument("shards " + std::to_string(o.shards) + " is absurd: at most 65536");
  if (o.max_key_bytes < 1 || o.max_key_bytes > (std::size_t{1} << 30)) {
    throw InvalidArgument("max_key_bytes must be between 1 and 2^30 (got " + std::to_string(o.max_key_bytes) + ")");
  }
}

}  // namespace

Limiter::Limiter(const LimitSpec& spec, const StoreOptions& options, std::shared_ptr<const Clock> clock) {
  const auto errors = validate(spec);
  if (!errors.empty()) {
    std::string message;
    for (const auto& e : errors) message += (message.empty() ? "" : "; ") + e.message;
    throw InvalidArgument(message);
  }
  validate_options(options);
  if (!clock) clock = std::make_shared<SystemClock>();
  impl_ = make_impl(spec, options, std::move(clock));
}

Limiter::~Limiter() = default;
Limiter::Limiter(Limiter&&) noexcept = default;
Limiter& Limiter::operator=(Limiter&&) noexcept = default;

Decision Limiter::check(std::string_view key, std::uint64_t cost, Fields fields) {
  return check_at(key, impl_->clock->now(), cost, fields);
}
Decision Limiter::check_at(std::string_view key, Nanos now, std::uint64_t cost, Fields fields) {
  if (fields == Fields::kAllButResetAfter) return impl_->check_brief(key, now.count(), cost);
  return impl_->check(key, now.count(), cost);
}
void Limiter::check_many(std::span<const std::string_view> keys, std::span<const std::uint64_t> costs,
                         std::span<Decision> out, Fields fields) {
  check_many_at(keys, costs, impl_->clock->now(), out, fields);
}

void Limiter::check_many_at(std::span<const std::string_view> keys, std::span<const std::uint64_t> costs, Nanos now,
                            std::span<Decision> out, Fields fields) {
  const bool brief = fields == Fields::kAllButResetAfter;
  if (out.size() != keys.size() || (!costs.empty() && costs.size() != keys.size())) {
    throw InvalidArgument("check_many: " + std::to_string(keys.size()) + " keys, " + std::to_string(costs.size()) +
                          " costs and " + std::to_string(out.size()) +
                          " decisions; the costs (unless none) and the decisions must be one per key");
  }
  std::size_t longest = 0;
  for (const std::string_view key : keys) longest = std::max(longest, key.size());
  impl_->check_size(longest);
  if (!costs.empty()) {
    impl_->check_many(keys.data(), costs.data(), keys.size(), now.count(), out.data(), brief, longest);
    return;
  }
  constexpr std::size_t kOnes = 64;
  static constexpr auto ones = [] {
    std::array<std::uint64_t, kOnes> a{};
    a.fill(1);
    return a;
  }();
  for (std::size_t base = 0; base < keys.size(); base += kOnes) {
    impl_->check_many(keys.data() + base, ones.data(), std::min(kOnes, keys.size() - base), now.count(),
                      out.data() + base, brief, longest);
  }
}

Decision Limiter::peek(std::string_view key, std::uint64_t cost) const {
  return peek_at(key, impl_->clock->now(), cost);
}
Decision Limiter::peek_at(std::string_view key, Nanos now, std::uint64_t cost) const {
  return impl_->peek(key, now.count(), cost);
}
namespace {

void check_amount(const char* field, std::uint64_t amount) {
  if (std::string e = library::amount_error(field, amount); !e.empty()) throw InvalidArgument(e);
}

}  // namespace

Reservation Limiter::reserve(std::string_view key, std::uint64_t estimate, Nanos ttl) {
  return reserve_at(key, impl_->clock->now(), estimate, ttl);
}

Reservation Limiter::reserve_at(std::string_view key, Nanos now, std::uint64_t estimate, Nanos ttl) {
  check_amount("estimate", estimate);
  if (std::string e = library::ttl_error(ttl); !e.empty()) throw InvalidArgument(e);
  impl_->check_key(key);
  Reservation r;
  const std::optional<std::string> id = impl_->reservations.claim(now.count());
  if (!id) {
    // As many reservations held as the store holds keys: refused, changing nothing, until some are settled or expire.
    r.decision = impl_->peek(key, now.count(), estimate);
    r.decision.allowed = false;
    r.decision.retry_after = ttl;
    return r;
  }
  r.decision = impl_->reserve(key, now.count(), estimate);
  if (!r.decision.allowed) return r;
  const core::Charge charge{now.count(), core::sat_add(now.count(), r.decision.reset_after.count())};
  impl_->reservations.add(*id, {.key = std::string(key),
                                .amount = estimate,
                                .charge = charge,
                                .expires_ns = core::sat_add(now.count(), ttl.count())});
  r.id = *id;
  return r;
}

Settlement Limiter::settle(std::string_view key, std::string_view id, std::uint64_t actual) {
  return settle_at(key, id, impl_->clock->now(), actual);
}

Settlement Limiter::settle_at(std::string_view key, std::string_view id, Nanos now, std::uint64_t actual) {
  check_amount("actual", actual);
  impl_->check_key(key);
  Settlement out;
  const auto entry = impl_->reservations.take(key, id, now.count());
  if (!entry) return out;
  out.settled = true;
  out.reserved = entry->amount;
  out.decision = impl_->settle(key, now.count(), entry->amount, actual, entry->charge);
  return out;
}

bool Limiter::reset(std::string_view key) { return impl_->reset(key); }
std::size_t Limiter::sweep() { return sweep_at(impl_->clock->now()); }
std::size_t Limiter::sweep_at(Nanos now) {
  impl_->reservations.sweep(now.count());
  return impl_->sweep(now.count());
}
StoreStats Limiter::stats() const { return impl_->stats(); }
const LimitSpec& Limiter::spec() const { return impl_->spec; }
const Clock& Limiter::clock() const { return *impl_->clock; }

struct LimiterAccess {
  static Limiter::Impl& impl(const Limiter& l) { return *l.impl_; }
};

namespace library {

void export_states(const Limiter& limiter, const StateVisitor& f) { LimiterAccess::impl(limiter).export_states(f); }

bool import_state(Limiter& limiter, std::string_view key, std::string_view state) {
  return LimiterAccess::impl(limiter).import_state(key, state, true);
}

bool state_valid(const Limiter& limiter, std::string_view key, std::string_view state) {
  return LimiterAccess::impl(limiter).import_state(key, state, false);
}

}  // namespace library

}  // namespace rk
