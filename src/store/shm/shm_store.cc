// store/shm/shm_store.cc: the shared store's decisions in a region: each a rate algorithm's decide() on the key's
// state, through the region's shard table (shard_table.h says how an update survives a process that dies in it,
// and a region that another process corrupted).
#include "store/shm/shm_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/algorithms.h"
#include "core/derived_params.h"
#include "core/registry.h"
#include "store/shm/layout.h"
#include "store/shm/shard_table.h"
#include "store/shm/testing.h"

namespace rk {

#if defined(RK_TEST_HOOKS)
namespace store::shm_testing {
void (*hook)(Stage) = nullptr;
}
#endif

namespace store::shm {

namespace {

template <class Algo>
class ShmStore final : public SharedLimiter::Impl {
  static_assert(sizeof(typename Algo::State) <= kStateBytes);
  static_assert(std::is_trivially_copyable_v<typename Algo::State>);

 public:
  ShmStore(std::unique_ptr<Region> r, const LimitSpec& s, const SharedOptions& o, std::shared_ptr<const Clock> c,
           typename Algo::Params p)
      : Impl(std::move(r), s, o, std::move(c)), table_(*region), params_(p) {}

  Decision decide(std::string_view key, std::int64_t now, std::uint64_t cost, bool record) override {
    if (key.size() > options.max_key_bytes) {
      throw InvalidArgument("key is " + std::to_string(key.size()) + " bytes, above the shared store's limit of " +
                            std::to_string(options.max_key_bytes) + " (SharedOptions::max_key_bytes)");
    }
    const typename Algo::State fresh{};
    Decision d;
    table_.update(
        key, std::span(reinterpret_cast<const unsigned char*>(&fresh), sizeof fresh),
        record ? ShardTable::Mode::kChange : ShardTable::Mode::kPeek,
        [&](unsigned char* bytes, bool) {
          typename Algo::State state;
          std::memcpy(&state, bytes, sizeof state);
          d = Algo::decide(params_, state, now, cost);
          std::memcpy(bytes, &state, sizeof state);
          return true;
        },
        [](const unsigned char*) { return true; });  // a rate limit's key may be evicted at any time
    return d;
  }

  bool reset(std::string_view key) override {
    if (key.size() > options.max_key_bytes) return false;
    return table_.erase(key);
  }

  SharedStats stats() override { return table_.stats(); }

 private:
  ShardTable table_;
  typename Algo::Params params_;
};

}  // namespace

std::unique_ptr<SharedLimiter::Impl> make_store(std::unique_ptr<Region> r, const LimitSpec& spec,
                                                const SharedOptions& o, std::shared_ptr<const Clock> c) {
  // check_options() has refused what shared memory cannot hold (core/registry.h): sliding_log's growing log.
  return core::with_algorithm(spec,
                              [&]<class Algo>(const typename Algo::Params& p) -> std::unique_ptr<SharedLimiter::Impl> {
                                if constexpr (std::is_same_v<Algo, core::SlidingLog>) {
                                  throw InvalidArgument("algorithm: sliding_log is not available in shared memory");
                                } else {
                                  return std::make_unique<ShmStore<Algo>>(std::move(r), spec, o, std::move(c), p);
                                }
                              });
}

}  // namespace store::shm

}  // namespace rk
