#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace rk::metrics {

namespace {

std::string format_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // The shortest of 15..17 significant digits that reads back as the same double.
  char buf[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string escape_help(std::string_view h) {
  std::string out;
  for (char c : h) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string render(Labels labels, const std::string& extra_name = "", const std::string& extra_value = "") {
  std::sort(labels.begin(), labels.end());
  if (!extra_name.empty()) labels.emplace_back(extra_name, extra_value);  // `le` goes last
  if (labels.empty()) return "";
  std::string s = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) s += ',';
    s += labels[i].first + "=\"" + escape_label_value(labels[i].second) + "\"";
  }
  return s + "}";
}

void add_double(std::atomic<double>& a, double d) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed)) {
  }
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
}

void Histogram::observe(double v) {
  const std::size_t i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  add_double(sum_, v);
}

Registry::Family& Registry::family(std::string_view name, std::string_view help, Type type) {
  auto it = families_.find(name);
  if (it == families_.end()) it = families_.emplace(std::string(name), Family{type, std::string(help), {}}).first;
  if (it->second.type != type) throw std::logic_error("metric " + std::string(name) + " registered with two types");
  return it->second;
}

Counter& Registry::counter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mu_);
  Series& s = family(name, help, Type::kCounter).series[render(labels)];
  if (!s.counter) {
    s.labels = labels;
    s.counter = &counters_.emplace_back();
  }
  return *s.counter;
}

Gauge& Registry::gauge(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard lock(mu_);
  Series& s = family(name, help, Type::kGauge).series[render(labels)];
  if (!s.gauge) {
    if (s.fn) throw std::logic_error("gauge " + std::string(name) + " is already a computed gauge");
    s.labels = labels;
    s.gauge = &gauges_.emplace_back();
  }
  return *s.gauge;
}

Histogram& Registry::histogram(std::string_view name, std::string_view help, const std::vector<double>& bounds,
                               const Labels& labels) {
  std::lock_guard lock(mu_);
  Series& s = family(name, help, Type::kHistogram).series[render(labels)];
  if (!s.histogram) {
    s.labels = labels;
    s.histogram = histograms_.emplace_back(std::make_unique<Histogram>(bounds)).get();
  }
  return *s.histogram;
}

std::uint64_t Registry::gauge_fn(std::string_view name, std::string_view help, const Labels& labels,
                                 std::function<double()> fn) {
  std::lock_guard lock(mu_);
  Series& s = family(name, help, Type::kGauge).series[render(labels)];
  if (s.gauge) throw std::logic_error("gauge " + std::string(name) + " is already a plain gauge");
  s.labels = labels;
  s.fn = std::move(fn);
  s.fn_id = next_fn_id_++;
  return s.fn_id;
}

void Registry::unregister(std::uint64_t id) {
  std::lock_guard lock(mu_);
  for (auto& [name, f] : families_) {
    for (auto it = f.series.begin(); it != f.series.end(); ++it) {
      if (it->second.fn_id == id) {
        f.series.erase(it);
        return;
      }
    }
  }
}

std::string Registry::expose() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (f.series.empty()) continue;
    static constexpr const char* kTypes[] = {"counter", "gauge", "histogram"};
    out += "# HELP " + name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + name + " " + kTypes[static_cast<int>(f.type)] + "\n";
    for (const auto& [text, s] : f.series) {
      if (s.counter) {
        out += name + text + " " + std::to_string(s.counter->value()) + "\n";
      } else if (s.gauge) {
        out += name + text + " " + format_double(s.gauge->value()) + "\n";
      } else if (s.fn) {
        out += name + text + " " + format_double(s.fn()) + "\n";
      } else if (s.histogram) {
        const Histogram& h = *s.histogram;
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= h.bounds().size(); ++i) {
          cumulative += h.bucket(i);
          const std::string le = i < h.bounds().size() ? format_double(h.bounds()[i]) : "+Inf";
          out += name + "_bucket" + render(s.labels, "le", le) + " " + std::to_string(cumulative) + "\n";
        }
        out += name + "_sum" + text + " " + format_double(h.sum()) + "\n";
        out += name + "_count" + text + " " + std::to_string(cumulative) + "\n";
      }
    }
  }
  return out;
}

}  // namespace rk::metrics
