// metrics/registry.h: counters, gauges and histograms, exposed in Prometheus's text format (0.0.4).
//
//   namespace n = rk::metrics::names;
//   rk::metrics::Registry registry;
//   auto& ok = registry.counter(n::kDecisions.name, n::kDecisions.help, {{"result", "ok"}});
//   ok.inc();                                   // lock-free; cache the reference, registration takes a lock
//   auto id = registry.gauge_fn(n::kStoreKeys.name, n::kStoreKeys.help, {{"rule", "a"}}, [&] { return keys(); });
//   registry.unregister(id);                    // when the rule goes away
//   std::string text = registry.expose();       // for GET /metrics
//
// Thread safety: inc/set/add/observe are relaxed atomics (no lock, no allocation) and may be called from any
// thread; registration, unregister() and expose() take the registry's mutex. Values read by expose() are each
// exact, but not a snapshot taken at one instant (a histogram's _sum may lag its _count by an observation).
//
// Invariants: a family (one metric name) has one type, one help text, one set of label names and, for
// histograms, one list of buckets; registering against any of them is a programming error and throws
// std::logic_error. Counter, Gauge and Histogram references stay valid for the registry's lifetime: only computed
// series (gauge_fn, counter_fn) are ever removed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rk::metrics {

// Label name -> value. Order does not matter: series are identified and printed with labels sorted by name.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Each metric on its own cache line: different threads bump different series, and should not slow each other.
inline constexpr std::size_t kCacheLineBytes = 64;

class alignas(kCacheLineBytes) Counter {
 public:
  void inc(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class alignas(kCacheLineBytes) Gauge {
 public:
  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(double delta) noexcept { value_.fetch_add(delta, std::memory_order_relaxed); }  // a CAS loop
  double value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class alignas(kCacheLineBytes) Histogram {
 public:
  // `bounds`: the buckets' inclusive upper bounds, strictly increasing and not NaN; the +Inf bucket is implied
  // (a trailing +Inf is accepted and dropped). Throws std::invalid_argument otherwise.
  explicit Histogram(std::vector<double> bounds);

  // Two relaxed atomic adds and a binary search. NaN lands in the +Inf bucket (and makes _sum NaN).
  void observe(double v) noexcept;

  const std::vector<double>& bounds() const noexcept { return bounds_; }
  // Observations in bucket i alone (not cumulative); i == bounds().size() is the +Inf bucket.
  std::uint64_t bucket(std::size_t i) const noexcept { return counts_[i].load(std::memory_order_relaxed); }
  std::uint64_t count() const noexcept;
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // bounds_.size() + 1; the count is their sum
  std::atomic<double> sum_{0};
};

class Registry {
 public:
  // Names a computed series, for unregister().
  using SeriesId = std::uint64_t;

  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The series `name{labels}`, created on first use; the same object every time after.
  Counter& counter(std::string_view name, std::string_view help, Labels labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, Labels labels = {});
  Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> bounds, Labels labels = {});

  // A series whose value `fn` computes at scrape time, under the registry's lock: `fn` must be quick and must
  // not call back into the registry. After unregister(id) returns, `fn` is never called again. Registering the
  // same name and labels again replaces the function and returns a new id; the old id then removes nothing.
  SeriesId gauge_fn(std::string_view name, std::string_view help, Labels labels, std::function<double()> fn);
  SeriesId counter_fn(std::string_view name, std::string_view help, Labels labels, std::function<std::uint64_t()> fn);
  // Removes a computed series; an unknown or replaced id is ignored.
  void unregister(SeriesId id);

  // Every family with at least one series, sorted by name; its series sorted by labels.
  std::string expose() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace rk::metrics
