#include "ratekeeper/limiter.h"

#include <string>

#include "core/algorithms.h"
#include "store/memory/sharded_lru.h"

namespace rk {

struct Limiter::Impl {
  Impl(const LimitSpec& s, std::shared_ptr<const Clock> c, std::size_t max_key) : spec(s), clock(std::move(c)), max_key_bytes(max_key) {}
  virtual ~Impl() = default;
  virtual Decision check(std::string_view key, std::int64_t now, std::uint64_t cost) = 0;
  virtual Decision peek(std::string_view key, std::int64_t now, std::uint64_t cost) const = 0;
  virtual bool reset(std::string_view key) = 0;
  virtual std::size_t sweep(std::int64_t now) = 0;
  virtual StoreStats stats() const = 0;

  void check_key(std::string_view key) const {
    if (key.size() > max_key_bytes) {
      throw InvalidArgument("key is " + std::to_string(key.size()) + " bytes, above the limit of " +
                            std::to_string(max_key_bytes) + " (StoreOptions::max_key_bytes)");
    }
  }

  LimitSpec spec;
  std::shared_ptr<const Clock> clock;
  std::size_t max_key_bytes;
};

namespace {

template <class Algo>
class Keyed final : public Limiter::Impl {
 public:
  Keyed(const LimitSpec& s, typename Algo::Params params, const StoreOptions& options, std::shared_ptr<const Clock> c)
      : Impl(s, std::move(c), options.max_key_bytes), params_(params), store_(options) {}

  Decision check(std::string_view key, std::int64_t now, std::uint64_t cost) override {
    check_key(key);
    return store_.update(key, [&](typename Algo::State& s) { return Algo::decide(params_, s, now, cost); });
  }

  Decision peek(std::string_view key, std::int64_t now, std::uint64_t cost) const override {
    check_key(key);
    return store_.read(key, [&](const typename Algo::State* s) {
      typename Algo::State copy = s ? *s : typename Algo::State{};
      return Algo::decide(params_, copy, now, cost);
    });
  }

  bool reset(std::string_view key) override { return store_.erase(key); }

  std::size_t sweep(std::int64_t now) override {
    return store_.erase_if([&](const typename Algo::State& s) { return Algo::forgettable(params_, s, now); });
  }

  StoreStats stats() const override { return store_.stats(); }

 private:
  typename Algo::Params params_;
  store::ShardedLru<typename Algo::State> store_;
};

std::unique_ptr<Limiter::Impl> make_impl(const LimitSpec& spec, const StoreOptions& o, std::shared_ptr<const Clock> c) {
  return core::with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) -> std::unique_ptr<Limiter::Impl> {
    return std::make_unique<Keyed<Algo>>(spec, p, o, std::move(c));
  });
}

void validate_options(const StoreOptions& o) {
  if (o.max_keys < 1) throw InvalidArgument("max_keys must be at least 1");
  if (o.max_keys > (std::size_t{1} << 40)) throw InvalidArgument("max_keys " + std::to_string(o.max_keys) + " is absurd: at most 2^40");
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

Decision Limiter::check(std::string_view key, std::uint64_t cost) { return check_at(key, impl_->clock->now(), cost); }
Decision Limiter::check_at(std::string_view key, Nanos now, std::uint64_t cost) {
  return impl_->check(key, now.count(), cost);
}
Decision Limiter::peek(std::string_view key, std::uint64_t cost) const { return peek_at(key, impl_->clock->now(), cost); }
Decision Limiter::peek_at(std::string_view key, Nanos now, std::uint64_t cost) const {
  return impl_->peek(key, now.count(), cost);
}
bool Limiter::reset(std::string_view key) { return impl_->reset(key); }
std::size_t Limiter::sweep() { return sweep_at(impl_->clock->now()); }
std::size_t Limiter::sweep_at(Nanos now) { return impl_->sweep(now.count()); }
StoreStats Limiter::stats() const { return impl_->stats(); }
const LimitSpec& Limiter::spec() const { return impl_->spec; }
const Clock& Limiter::clock() const { return *impl_->clock; }

}  // namespace rk
