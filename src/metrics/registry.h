// metrics/registry.h: counters, gauges and histograms, exposed in Prometheus's text format (0.0.4).
//
//   rk::metrics::Registry registry;
//   auto& ok = registry.counter("ratekeeper_decisions_total", "Decisions.", {{"result", "ok"}});
//   ok.inc();                                   // lock-free; cache the reference, registration takes a lock
//   std::string text = registry.expose();       // for GET /metrics
//
// Thread safety: registration and expose() lock the registry; inc/set/add/observe are lock-free atomics and may
// be called from any thread. References stay valid for the registry's lifetime (series are never moved).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rk::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double d) {
    double cur = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  std::uint64_t bucket(std::size_t i) const { return counts_[i].load(std::memory_order_relaxed); }  // not cumulative
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

class Registry {
 public:
  Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& gauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& histogram(std::string_view name, std::string_view help, const std::vector<double>& bounds,
                       const Labels& labels = {});
  // A gauge computed at scrape time; returns an id for unregister().
  std::uint64_t gauge_fn(std::string_view name, std::string_view help, const Labels& labels, std::function<double()> fn);
  void unregister(std::uint64_t id);

  std::string expose() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::string label_text;  // rendered, sorted: {a="1",b="2"}
    Counter* counter = nullptr;
    Gauge* gauge = nullptr;
    Histogram* histogram = nullptr;
    std::function<double()> fn;
    std::uint64_t fn_id = 0;
  };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, Series> series;  // by label_text
  };

  Family& family(std::string_view name, std::string_view help, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
  std::deque<Counter> counters_;
  std::deque<Gauge> gauges_;
  std::deque<std::unique_ptr<Histogram>> histograms_;
  std::uint64_t next_fn_id_ = 1;
};

// Label values escaped as the text format requires: backslash, double quote, newline.
std::string escape_label_value(std::string_view v);

}  // namespace rk::metrics
