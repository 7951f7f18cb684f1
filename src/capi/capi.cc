// The C API (include/ratekeeper/ratekeeper.h) over rk::Limiter. No exception crosses it: each entry point catches
// everything and turns it into a status and a thread-local message.
#include "ratekeeper/ratekeeper.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/registry.h"
#include "http_fields/rate_limit_headers.h"
#include "ratekeeper/concurrency.h"
#include "ratekeeper/limiter.h"
#include "ratekeeper/shared.h"
#include "store/memory/key_digest.h"

struct rk_limiter {
  explicit rk_limiter(rk::Limiter l) : limiter(std::move(l)) {}
  rk::Limiter limiter;
};

struct rk_concurrency {
  explicit rk_concurrency(const rk::ConcurrencySpec& spec) : limiter(spec) {}
  rk::ConcurrencyLimiter limiter;
};

struct rk_shared {
  explicit rk_shared(rk::SharedLimiter l) : limiter(std::move(l)) {}
  rk::SharedLimiter limiter;
};

struct rk_shared_concurrency {
  explicit rk_shared_concurrency(rk::SharedConcurrencyLimiter l) : limiter(std::move(l)) {}
  rk::SharedConcurrencyLimiter limiter;
};

namespace {

thread_local std::string last_error;

rk_status fail(rk_status s, std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {
    last_error.clear();  // out of memory for the message itself: the status still says what happened
  }
  return s;
}

// Runs f, mapping what it throws to a status.
template <class F>
rk_status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const rk::InvalidArgument& e) {
    return fail(RK_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(RK_NO_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(RK_INTERNAL, e.what());
  } catch (...) {
    return fail(RK_INTERNAL, "an unknown error");
  }
}

void to_c(const rk::Decision& d, rk_decision* out) {
  out->allowed = d.allowed ? 1 : 0;
  out->limit = d.limit;
  out->remaining = d.remaining;
  out->retry_after_ns = d.retry_after.count();
  out->reset_after_ns = d.reset_after.count();
  out->delay_ns = d.delay.count();
  out->has_estimate = d.estimate.has_value() ? 1 : 0;
  out->estimate = d.estimate.value_or(0.0);
}

rk::Decision from_c(const rk_decision& d) {
  return {.allowed = d.allowed != 0,
          .limit = d.limit,
          .remaining = d.remaining,
          .retry_after = rk::Nanos{d.retry_after_ns},
          .reset_after = rk::Nanos{d.reset_after_ns},
          .delay = rk::Nanos{d.delay_ns}};
}

// The formatter's field name as the static string the C caller may keep.
const char* static_field_name(const std::string& name) {
  for (const char* n : rk::http_fields::kFieldNames) {
    if (name == n) return n;
  }
  throw std::logic_error("the header formatter wrote a field it does not list: " + name);
}

// The key's bytes, or an error for a NULL with a length.
bool key_view(const char* key, size_t len, std::string_view& out) {
  if (key == nullptr && len != 0) return false;
  out = len == 0 ? std::string_view("", 0) : std::string_view(key, len);
  return true;
}

// Checks the pointers, then fills *out with decide(key).
template <class Handle, class F>
rk_status decide(Handle* l, const char* key, size_t len, rk_decision* out, F&& decide_key) noexcept {
  return guarded([&] {
    std::string_view k;
    if (l == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter is NULL");
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (the rk_decision to fill) is NULL");
    if (!key_view(key, len, k)) return fail(RK_INVALID_ARGUMENT, "key is NULL but key_len is " + std::to_string(len));
    to_c(decide_key(l->limiter, k), out);
    return RK_OK;
  });
}

// The four ways to ask, the same for a limiter and a shared region (both handles hold a `limiter` with this API).
template <class Handle>
rk_status check_at(Handle* h, const char* key, size_t len, std::optional<rk::Nanos> now, uint64_t cost,
                   rk_decision* out) noexcept {
  return decide(h, key, len, out,
                [&](auto& l, std::string_view k) { return now ? l.check_at(k, *now, cost) : l.check(k, cost); });
}

template <class Handle>
rk_status peek_at(const Handle* h, const char* key, size_t len, std::optional<rk::Nanos> now, uint64_t cost,
                  rk_decision* out) noexcept {
  return decide(h, key, len, out,
                [&](const auto& l, std::string_view k) { return now ? l.peek_at(k, *now, cost) : l.peek(k, cost); });
}

// check_many over C arrays: the views and decisions on the stack for the usual handful, on the heap beyond.
rk_status check_many(rk_limiter* l, const char* const* keys, const size_t* lens, const uint64_t* costs, size_t n,
                     std::optional<rk::Nanos> now, rk_decision* out) noexcept {
  return guarded([&] {
    if (l == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter is NULL");
    if (n == 0) return RK_OK;
    if (keys == nullptr || lens == nullptr || out == nullptr) {
      return fail(RK_INVALID_ARGUMENT, std::string(keys == nullptr   ? "keys"
                                                   : lens == nullptr ? "key_lens"
                                                                     : "out") +
                                           " is NULL but n is " + std::to_string(n));
    }
    constexpr size_t kOnStack = 32;
    std::string_view views_here[kOnStack];
    rk::Decision decisions_here[kOnStack];
    std::vector<std::string_view> views_heap;
    std::vector<rk::Decision> decisions_heap;
    std::string_view* views = views_here;
    rk::Decision* decisions = decisions_here;
    if (n > kOnStack) {
      views_heap.resize(n);
      decisions_heap.resize(n);
      views = views_heap.data();
      decisions = decisions_heap.data();
    }
    for (size_t i = 0; i < n; ++i) {
      if (!key_view(keys[i], lens[i], views[i])) {
        return fail(RK_INVALID_ARGUMENT, "keys[" + std::to_string(i) + "] is NULL but key_lens[" + std::to_string(i) +
                                             "] is " + std::to_string(lens[i]));
      }
    }
    const std::span<const std::uint64_t> c = costs ? std::span<const std::uint64_t>(costs, n)
                                                   : std::span<const std::uint64_t>();
    const std::span<const std::string_view> k(views, n);
    const std::span<rk::Decision> d(decisions, n);
    if (now) {
      l->limiter.check_many_at(k, c, *now, d);
    } else {
      l->limiter.check_many(k, c, d);
    }
    for (size_t i = 0; i < n; ++i) to_c(decisions[i], &out[i]);
    return RK_OK;
  });
}

// The C spec as a checked rk::LimitSpec, with max_keys and max_key_bytes checked too.
rk_status to_spec(const rk_spec* spec, rk::LimitSpec& s) {
  if (spec == nullptr) return fail(RK_INVALID_ARGUMENT, "spec is NULL");
  if (spec->algorithm == nullptr) return fail(RK_INVALID_ARGUMENT, "algorithm is NULL");
  const auto algorithm = rk::parse_algorithm(spec->algorithm);
  if (!algorithm) {
    return fail(RK_INVALID_ARGUMENT,
                std::string("algorithm: '") + spec->algorithm + "' is not one of " + rk::core::algorithm_names());
  }
  s = rk::LimitSpec{.algorithm = *algorithm, .limit = spec->limit, .window = rk::Nanos{spec->window_ns}};
  if (spec->half_life_ns != -1) s.half_life = rk::Nanos{spec->half_life_ns};
  if (!std::isnan(spec->burst)) s.burst = spec->burst;
  if (!std::isnan(spec->capacity)) s.capacity = spec->capacity;
  if (spec->count_refused != -1) {
    if (spec->count_refused != 0 && spec->count_refused != 1) {
      return fail(RK_INVALID_ARGUMENT,
                  "count_refused: " + std::to_string(spec->count_refused) + " is not 0, 1 or -1 (unset)");
    }
    s.count_refused = spec->count_refused == 1;
  }
  std::string problems;
  for (const auto& e : rk::validate(s)) problems += (problems.empty() ? "" : "; ") + e.param + ": " + e.message;
  if (spec->max_keys == 0) problems += std::string(problems.empty() ? "" : "; ") + "max_keys: 0 keys; at least 1";
  if (spec->max_key_bytes == 0) {
    problems += std::string(problems.empty() ? "" : "; ") + "max_key_bytes: 0 bytes; at least 1";
  }
  if (!problems.empty()) return fail(RK_INVALID_ARGUMENT, problems);
  return RK_OK;
}

}  // namespace

namespace {

rk_status reserve(rk_limiter* l, const char* key, size_t len, std::optional<rk::Nanos> now, uint64_t estimate,
                  int64_t ttl_ns, char* id, rk_decision* out) noexcept {
  return guarded([&] {
    std::string_view k;
    if (l == nullptr || id == nullptr || out == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter, id or out is NULL");
    if (!key_view(key, len, k)) return fail(RK_INVALID_ARGUMENT, "key is NULL but key_len is " + std::to_string(len));
    const rk::Nanos ttl = ttl_ns == 0 ? rk::kDefaultReservationTtl : rk::Nanos{ttl_ns};
    const rk::Reservation r = now ? l->limiter.reserve_at(k, *now, estimate, ttl)
                                  : l->limiter.reserve(k, estimate, ttl);
    to_c(r.decision, out);
    std::memcpy(id, r.id.c_str(), r.id.size() + 1);
    return RK_OK;
  });
}

rk_status settle(rk_limiter* l, const char* key, size_t len, std::optional<rk::Nanos> now, const char* id,
                 uint64_t actual, int* settled, rk_decision* out) noexcept {
  return guarded([&] {
    std::string_view k;
    if (l == nullptr || id == nullptr || out == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter, id or out is NULL");
    if (!key_view(key, len, k)) return fail(RK_INVALID_ARGUMENT, "key is NULL but key_len is " + std::to_string(len));
    const std::string_view i(id, strnlen(id, RK_RESERVATION_ID_SIZE));
    const rk::Settlement s = now ? l->limiter.settle_at(k, i, *now, actual) : l->limiter.settle(k, i, actual);
    if (settled != nullptr) *settled = s.settled ? 1 : 0;
    if (s.settled) to_c(s.decision, out);
    return RK_OK;
  });
}

// An acquire's answer, whichever limiter gave it.
struct Acquired {
  bool acquired;
  rk::Nanos retry_after;
  std::string id;
};
Acquired acquired_of(rk::Lease l) { return {static_cast<bool>(l), l.retry_after(), l.detach()}; }
Acquired acquired_of(rk::SharedLease l) { return {l.acquired, l.retry_after, std::move(l.id)}; }

// rk_concurrency's and rk_shared_concurrency's acquire, release and in_flight, on their `limiter`.
template <class C>
rk_status lease_acquire(C* c, const char* key, size_t len, std::optional<rk::Nanos> now, char* lease_id, int* acquired,
                        int64_t* retry_after_ns) noexcept {
  return guarded([&] {
    if (c == nullptr || (key == nullptr && len > 0) || lease_id == nullptr || acquired == nullptr) {
      return fail(RK_INVALID_ARGUMENT, "limiter, key, lease_id or acquired is NULL");
    }
    const std::string_view k(key == nullptr ? "" : key, len);
    const Acquired a = acquired_of(now ? c->limiter.acquire_at(k, *now) : c->limiter.acquire(k));
    *acquired = a.acquired ? 1 : 0;
    if (retry_after_ns != nullptr) *retry_after_ns = a.retry_after.count();
    std::memcpy(lease_id, a.id.c_str(), a.id.size() + 1);
    return RK_OK;
  });
}

template <class C>
rk_status lease_release(C* c, const char* key, size_t len, const char* lease_id, std::optional<rk::Nanos> now,
                        int* released) noexcept {
  return guarded([&] {
    if (c == nullptr || (key == nullptr && len > 0) || lease_id == nullptr) {
      return fail(RK_INVALID_ARGUMENT, "limiter, key or lease_id is NULL");
    }
    const std::string_view k(key == nullptr ? "" : key, len);
    const std::string_view id(lease_id, strnlen(lease_id, RK_LEASE_ID_SIZE));
    const bool done = now ? c->limiter.release_at(k, id, *now) : c->limiter.release(k, id);
    if (released != nullptr) *released = done ? 1 : 0;
    return RK_OK;
  });
}

template <class C>
rk_status leases_in_flight(const C* c, const char* key, size_t key_len, uint32_t* out) noexcept {
  return guarded([&] {
    if (c == nullptr || (key == nullptr && key_len > 0) || out == nullptr) {
      return fail(RK_INVALID_ARGUMENT, "limiter, key or out is NULL");
    }
    *out = c->limiter.in_flight(std::string_view(key == nullptr ? "" : key, key_len));
    return RK_OK;
  });
}

}  // namespace

extern "C" {

const char* rk_version(void) { return RK_VERSION; }

const char* rk_last_error(void) { return last_error.c_str(); }

void rk_spec_init(rk_spec* spec) {
  if (spec == nullptr) return;
  *spec = rk_spec{};
  spec->algorithm = "earrrl";
  spec->limit = 0;
  spec->window_ns = rk::kNanosPerSecond;
  spec->half_life_ns = -1;
  spec->burst = NAN;
  spec->capacity = NAN;
  spec->count_refused = -1;
  spec->max_keys = 1'000'000;
  spec->max_key_bytes = 4096;
}

rk_status rk_limiter_new(const rk_spec* spec, rk_limiter** out) {
  return guarded([&] {
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (where the new limiter goes) is NULL");
    *out = nullptr;
    rk::LimitSpec s;
    if (const rk_status st = to_spec(spec, s); st != RK_OK) return st;
    rk::StoreOptions options{.max_keys = spec->max_keys, .max_key_bytes = spec->max_key_bytes};
    *out = new rk_limiter(rk::Limiter(s, options));
    return RK_OK;
  });
}

rk_status rk_spec_check(const rk_spec* spec) {
  return guarded([&] {
    rk::LimitSpec s;
    return to_spec(spec, s);
  });
}

void rk_limiter_free(rk_limiter* limiter) { delete limiter; }

rk_status rk_limiter_check(rk_limiter* limiter, const char* key, size_t key_len, uint64_t cost, rk_decision* out) {
  return check_at(limiter, key, key_len, std::nullopt, cost, out);
}

rk_status rk_limiter_check_at(rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns, uint64_t cost,
                              rk_decision* out) {
  return check_at(limiter, key, key_len, rk::Nanos{now_ns}, cost, out);
}

rk_status rk_limiter_check_many(rk_limiter* limiter, const char* const* keys, const size_t* key_lens,
                                const uint64_t* costs, size_t n, rk_decision* out) {
  return check_many(limiter, keys, key_lens, costs, n, std::nullopt, out);
}

rk_status rk_limiter_check_many_at(rk_limiter* limiter, const char* const* keys, const size_t* key_lens,
                                   const uint64_t* costs, size_t n, int64_t now_ns, rk_decision* out) {
  return check_many(limiter, keys, key_lens, costs, n, rk::Nanos{now_ns}, out);
}

rk_status rk_limiter_peek(const rk_limiter* limiter, const char* key, size_t key_len, uint64_t cost, rk_decision* out) {
  return peek_at(limiter, key, key_len, std::nullopt, cost, out);
}

rk_status rk_limiter_peek_at(const rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns, uint64_t cost,
                             rk_decision* out) {
  return peek_at(limiter, key, key_len, rk::Nanos{now_ns}, cost, out);
}

rk_status rk_limiter_reserve(rk_limiter* limiter, const char* key, size_t key_len, uint64_t estimate, int64_t ttl_ns,
                             char id[RK_RESERVATION_ID_SIZE], rk_decision* out) {
  return reserve(limiter, key, key_len, std::nullopt, estimate, ttl_ns, id, out);
}

rk_status rk_limiter_reserve_at(rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns, uint64_t estimate,
                                int64_t ttl_ns, char id[RK_RESERVATION_ID_SIZE], rk_decision* out) {
  return reserve(limiter, key, key_len, rk::Nanos{now_ns}, estimate, ttl_ns, id, out);
}

rk_status rk_limiter_settle(rk_limiter* limiter, const char* key, size_t key_len, const char* id, uint64_t actual,
                            int* settled, rk_decision* out) {
  return settle(limiter, key, key_len, std::nullopt, id, actual, settled, out);
}

rk_status rk_limiter_settle_at(rk_limiter* limiter, const char* key, size_t key_len, int64_t now_ns, const char* id,
                               uint64_t actual, int* settled, rk_decision* out) {
  return settle(limiter, key, key_len, rk::Nanos{now_ns}, id, actual, settled, out);
}

rk_status rk_limiter_reset(rk_limiter* limiter, const char* key, size_t key_len, int* was_tracked) {
  return guarded([&] {
    std::string_view k;
    if (limiter == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter is NULL");
    if (!key_view(key, key_len, k)) {
      return fail(RK_INVALID_ARGUMENT, "key is NULL but key_len is " + std::to_string(key_len));
    }
    const bool tracked = limiter->limiter.reset(k);
    if (was_tracked) *was_tracked = tracked ? 1 : 0;
    return RK_OK;
  });
}

rk_status rk_limiter_sweep_at(rk_limiter* limiter, int64_t now_ns, uint64_t* forgotten) {
  return guarded([&] {
    if (limiter == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter is NULL");
    const auto n = limiter->limiter.sweep_at(rk::Nanos{now_ns});
    if (forgotten) *forgotten = n;
    return RK_OK;
  });
}

rk_status rk_limiter_stats(const rk_limiter* limiter, rk_stats* out) {
  return guarded([&] {
    if (limiter == nullptr) return fail(RK_INVALID_ARGUMENT, "limiter is NULL");
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (the rk_stats to fill) is NULL");
    const rk::StoreStats s = limiter->limiter.stats();
    out->keys = s.keys;
    out->evictions = s.evictions;
    out->forgotten = s.forgotten;
    out->memory_bytes = s.memory_bytes;
    return RK_OK;
  });
}

size_t rk_shared_region_bytes(uint64_t max_keys, uint64_t max_key_bytes, uint64_t shards) {
  if (max_keys < 1 || max_key_bytes < 1 || shards < 1 || max_keys > (uint64_t{1} << 31) || max_key_bytes > 4096 ||
      shards > 1024) {
    return 0;
  }
  return rk::SharedLimiter::region_bytes({.max_keys = max_keys, .max_key_bytes = max_key_bytes, .shards = shards});
}

uint64_t rk_shared_keys_that_fit(size_t bytes, uint64_t max_key_bytes, uint64_t shards) {
  return rk::SharedLimiter::keys_that_fit(bytes, max_key_bytes, shards);
}

rk_status rk_shared_in_region(void* base, size_t bytes, int format, const rk_spec* spec, uint64_t shards,
                              rk_shared** out) {
  return guarded([&] {
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (where the new handle goes) is NULL");
    *out = nullptr;
    rk::LimitSpec s;
    if (const rk_status st = to_spec(spec, s); st != RK_OK) return st;
    const rk::SharedOptions o{.max_keys = spec->max_keys, .max_key_bytes = spec->max_key_bytes, .shards = shards};
    *out = new rk_shared(rk::SharedLimiter::in_region(base, bytes, format != 0, s, o));
    return RK_OK;
  });
}

void rk_shared_free(rk_shared* shared) { delete shared; }

rk_status rk_shared_check(rk_shared* shared, const char* key, size_t key_len, uint64_t cost, rk_decision* out) {
  return check_at(shared, key, key_len, std::nullopt, cost, out);
}

rk_status rk_shared_check_at(rk_shared* shared, const char* key, size_t key_len, int64_t now_ns, uint64_t cost,
                             rk_decision* out) {
  return check_at(shared, key, key_len, rk::Nanos{now_ns}, cost, out);
}

rk_status rk_shared_peek_at(const rk_shared* shared, const char* key, size_t key_len, int64_t now_ns, uint64_t cost,
                            rk_decision* out) {
  return peek_at(shared, key, key_len, rk::Nanos{now_ns}, cost, out);
}

rk_status rk_shared_stats(const rk_shared* shared, rk_stats* out) {
  return guarded([&] {
    if (shared == nullptr) return fail(RK_INVALID_ARGUMENT, "shared is NULL");
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (the rk_stats to fill) is NULL");
    const rk::SharedStats s = shared->limiter.stats();
    out->keys = s.keys;
    out->evictions = s.evictions;
    out->forgotten = 0;
    out->memory_bytes = s.region_bytes;
    return RK_OK;
  });
}

size_t rk_headers_bytes(const rk_header_limit* limits, size_t n_limits) {
  if (limits == nullptr) return 0;
  // Per limit: its name quoted (each byte escaped at worst) in RateLimit-Policy and perhaps RateLimit, and
  // 15-digit numbers; then the X- fields and Retry-After.
  size_t bytes = 128;
  for (size_t i = 0; i < n_limits; ++i) bytes += 4 * limits[i].name_len + 96;
  return bytes;
}

rk_status rk_format_headers(const rk_header_limit* limits, size_t n_limits, char* buf, size_t buf_len,
                            rk_header_field* fields, size_t* n_fields) {
  return guarded([&] {
    if (limits == nullptr && n_limits != 0) return fail(RK_INVALID_ARGUMENT, "limits is NULL");
    if (fields == nullptr || n_fields == nullptr) return fail(RK_INVALID_ARGUMENT, "fields or n_fields is NULL");
    if (buf == nullptr && buf_len != 0) return fail(RK_INVALID_ARGUMENT, "buf is NULL but buf_len is not 0");
    std::vector<rk::http_fields::LimitState> states;
    states.reserve(n_limits);
    for (size_t i = 0; i < n_limits; ++i) {
      const rk_header_limit& l = limits[i];
      if (l.name == nullptr && l.name_len != 0) {
        return fail(RK_INVALID_ARGUMENT, "limits[" + std::to_string(i) + "].name is NULL");
      }
      const std::string_view name = l.name_len == 0 ? std::string_view() : std::string_view(l.name, l.name_len);
      states.push_back(rk::http_fields::from_decision(name, l.quota, rk::Nanos{l.window_ns}, from_c(l.decision)));
    }
    const auto formatted = rk::http_fields::format(states);
    size_t used = 0;
    for (const auto& [name, value] : formatted) used += value.size();
    if (used > buf_len) {
      return fail(RK_INVALID_ARGUMENT, "buf_len: " + std::to_string(buf_len) + " bytes; the values need " +
                                           std::to_string(used) + " (rk_headers_bytes says how many)");
    }
    static_assert(RK_HEADER_FIELDS_MAX == std::size(rk::http_fields::kFieldNames));
    used = 0;
    *n_fields = 0;
    for (const auto& [name, value] : formatted) {
      if (!value.empty()) std::memcpy(buf + used, value.data(), value.size());
      fields[*n_fields] = {static_field_name(name), buf + used, value.size()};
      used += value.size();
      ++*n_fields;
    }
    return RK_OK;
  });
}

rk_status rk_key_digest_seed(uint8_t seed[RK_KEY_DIGEST_BYTES]) {
  return guarded([&] {
    if (seed == nullptr) return fail(RK_INVALID_ARGUMENT, "seed is NULL");
    const rk::store::memory::KeyDigestSeed s = rk::store::memory::random_digest_seed();
    std::memcpy(seed, s.data(), s.size());
    return RK_OK;
  });
}

rk_status rk_key_digest(const uint8_t seed[RK_KEY_DIGEST_BYTES], const char* key, size_t key_len,
                        uint8_t out[RK_KEY_DIGEST_BYTES]) {
  return guarded([&] {
    std::string_view k;
    if (seed == nullptr || out == nullptr) return fail(RK_INVALID_ARGUMENT, "seed or out is NULL");
    if (!key_view(key, key_len, k)) {
      return fail(RK_INVALID_ARGUMENT, "key is NULL but key_len is " + std::to_string(key_len));
    }
    rk::store::memory::KeyDigestSeed s;
    std::memcpy(s.data(), seed, s.size());
    const rk::store::memory::KeyDigest d = rk::store::memory::key_digest(s, k);
    std::memcpy(out, d.data(), d.size());
    return RK_OK;
  });
}

rk_status rk_concurrency_new(uint32_t max_in_flight, int64_t lease_ttl_ns, rk_concurrency** out) {
  return guarded([&] {
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (where the new limiter goes) is NULL");
    *out = nullptr;
    rk::ConcurrencySpec spec{.max_in_flight = max_in_flight};
    if (lease_ttl_ns != 0) spec.lease_ttl = rk::Nanos{lease_ttl_ns};
    *out = new rk_concurrency(spec);
    return RK_OK;
  });
}

void rk_concurrency_free(rk_concurrency* c) { delete c; }

rk_status rk_concurrency_acquire(rk_concurrency* c, const char* key, size_t key_len, char lease_id[RK_LEASE_ID_SIZE],
                                 int* acquired, int64_t* retry_after_ns) {
  return lease_acquire(c, key, key_len, std::nullopt, lease_id, acquired, retry_after_ns);
}

rk_status rk_concurrency_acquire_at(rk_concurrency* c, const char* key, size_t key_len, int64_t now_ns,
                                    char lease_id[RK_LEASE_ID_SIZE], int* acquired, int64_t* retry_after_ns) {
  return lease_acquire(c, key, key_len, rk::Nanos{now_ns}, lease_id, acquired, retry_after_ns);
}

rk_status rk_concurrency_release(rk_concurrency* c, const char* key, size_t key_len, const char* lease_id,
                                 int* released) {
  return lease_release(c, key, key_len, lease_id, std::nullopt, released);
}

rk_status rk_concurrency_release_at(rk_concurrency* c, const char* key, size_t key_len, const char* lease_id,
                                    int64_t now_ns, int* released) {
  return lease_release(c, key, key_len, lease_id, rk::Nanos{now_ns}, released);
}

rk_status rk_concurrency_in_flight(const rk_concurrency* c, const char* key, size_t key_len, uint32_t* out) {
  return leases_in_flight(c, key, key_len, out);
}

static_assert(RK_SHARED_MAX_IN_FLIGHT == rk::kMaxSharedInFlight);

size_t rk_shared_concurrency_region_bytes(uint32_t max_in_flight, uint64_t max_keys, uint64_t max_key_bytes,
                                          uint64_t shards) {
  if (max_in_flight < 1 || max_in_flight > rk::kMaxSharedInFlight || max_keys < 1 || max_key_bytes < 1 || shards < 1 ||
      max_keys > (uint64_t{1} << 31) || max_key_bytes > 4096 || shards > 1024) {
    return 0;
  }
  return rk::SharedConcurrencyLimiter::region_bytes(
      max_in_flight, {.max_keys = max_keys, .max_key_bytes = max_key_bytes, .shards = shards});
}

uint64_t rk_shared_concurrency_keys_that_fit(size_t bytes, uint32_t max_in_flight, uint64_t max_key_bytes,
                                             uint64_t shards) {
  return rk::SharedConcurrencyLimiter::keys_that_fit(bytes, max_in_flight, max_key_bytes, shards);
}

rk_status rk_shared_concurrency_in_region(void* base, size_t bytes, int format, uint32_t max_in_flight,
                                          int64_t lease_ttl_ns, uint64_t max_keys, uint64_t max_key_bytes,
                                          uint64_t shards, rk_shared_concurrency** out) {
  return guarded([&] {
    if (out == nullptr) return fail(RK_INVALID_ARGUMENT, "out (where the new handle goes) is NULL");
    *out = nullptr;
    rk::ConcurrencySpec spec{.max_in_flight = max_in_flight};
    if (lease_ttl_ns != 0) spec.lease_ttl = rk::Nanos{lease_ttl_ns};
    const rk::SharedOptions o{.max_keys = max_keys, .max_key_bytes = max_key_bytes, .shards = shards};
    *out = new rk_shared_concurrency(rk::SharedConcurrencyLimiter::in_region(base, bytes, format != 0, spec, o));
    return RK_OK;
  });
}

void rk_shared_concurrency_free(rk_shared_concurrency* c) { delete c; }

rk_status rk_shared_concurrency_acquire(rk_shared_concurrency* c, const char* key, size_t key_len,
                                        char lease_id[RK_LEASE_ID_SIZE], int* acquired, int64_t* retry_after_ns) {
  return lease_acquire(c, key, key_len, std::nullopt, lease_id, acquired, retry_after_ns);
}

rk_status rk_shared_concurrency_acquire_at(rk_shared_concurrency* c, const char* key, size_t key_len, int64_t now_ns,
                                           char lease_id[RK_LEASE_ID_SIZE], int* acquired, int64_t* retry_after_ns) {
  return lease_acquire(c, key, key_len, rk::Nanos{now_ns}, lease_id, acquired, retry_after_ns);
}

rk_status rk_shared_concurrency_release(rk_shared_concurrency* c, const char* key, size_t key_len, const char* lease_id,
                                        int* released) {
  return lease_release(c, key, key_len, lease_id, std::nullopt, released);
}

rk_status rk_shared_concurrency_release_at(rk_shared_concurrency* c, const char* key, size_t key_len,
                                           const char* lease_id, int64_t now_ns, int* released) {
  return lease_release(c, key, key_len, lease_id, rk::Nanos{now_ns}, released);
}

rk_status rk_shared_concurrency_in_flight(const rk_shared_concurrency* c, const char* key, size_t key_len,
                                          uint32_t* out) {
  return leases_in_flight(c, key, key_len, out);
}

}  // extern "C"
