#include "metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>

// Thread safety: State is guarded by State::mu, all of it. Series live in std::map nodes and own their metric
// through a unique_ptr, so a reference handed out survives any later insertion; families are never erased.

namespace rk::metrics {

namespace {

enum class Type { kCounter, kGauge, kHistogram };

constexpr std::string_view type_name(Type t) {
  switch (t) {
    case Type::kCounter: return "counter";
    case Type::kGauge: return "gauge";
    case Type::kHistogram: return "histogram";
  }
  return "untyped";
}

constexpr bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool valid_metric_name(std::string_view n) {
  if (n.empty() || !(is_letter(n[0]) || n[0] == ':')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return is_letter(c) || is_digit(c) || c == ':'; });
}

// Names starting with "__" are Prometheus's own.
bool valid_label_name(std::string_view n) {
  if (n.empty() || !is_letter(n[0]) || n.starts_with("__")) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return is_letter(c) || is_digit(c); });
}

// Numbers in the C locale whatever the process's locale (printf's "%g" would write "0,5" under de_DE).
void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (std::trunc(v) == v && std::fabs(v) < 0x1p53) {
    // Whole numbers as integers: a timestamp reads 1763812345, not 1.763812345e+09.
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v)).ptr);
  } else {
    char buf[32];  // the shortest text that reads back as the same double
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
}

void append_escaped(std::string& out, std::string_view s, bool escape_quote) {
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '"' && escape_quote) out += "\\\"";
    else out += c;
  }
}

// {a="1",b="2"} for labels sorted by name; "" for none.
std::string render(const Labels& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (const auto& [name, value] : labels) {
    if (s.size() > 1) s += ',';
    s += name;
    s += "=\"";
    append_escaped(s, value, /*escape_quote=*/true);
    s += '"';
  }
  return s + "}";
}

[[noreturn]] void misuse(std::string_view name, const std::string& what) {
  throw std::logic_error("metric " + std::string(name) + ": " + what);
}

struct Series {
  std::string label_text;  // rendered once, at registration
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
  std::function<double()> gauge_fn;
  std::function<std::uint64_t()> counter_fn;
  Registry::SeriesId fn_id = 0;

  bool computed() const { return gauge_fn || counter_fn; }
};

struct Family {
  Type type;
  std::string help;
  std::vector<std::string> label_names;  // sorted; set by the first series
  std::vector<double> bounds;            // histograms only
  std::vector<std::string> le;           // bounds as `le` label values, then "+Inf"
  std::map<Labels, Series> series;       // keys sorted by label name
};

}  // namespace

struct Registry::State {
  std::mutex mu;
  std::map<std::string, Family, std::less<>> families;
  std::map<SeriesId, std::pair<Family*, Labels>> computed;  // for unregister()
  SeriesId next_id = 1;

  Family& family(std::string_view name, std::string_view help, Type type);
  Series& series(std::string_view name, Family& f, Labels labels);
  SeriesId set_computed(std::string_view name, std::string_view help, Type type, Labels labels,
                        std::function<double()> gauge_fn, std::function<std::uint64_t()> counter_fn);
};

// ---- Histogram

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  if (!bounds_.empty() && bounds_.back() == std::numeric_limits<double>::infinity()) bounds_.pop_back();
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (std::isnan(bounds_[i]) || std::isinf(bounds_[i]) || (i > 0 && !(bounds_[i - 1] < bounds_[i]))) {
      throw std::invalid_argument("histogram bounds must be finite and strictly increasing");
    }
  }
  counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
}

void Histogram::observe(double v) noexcept {
  // The first bound >= v: `le` is inclusive. NaN compares false with everything, so it goes to +Inf explicitly.
  const auto at = std::isnan(v) ? bounds_.end() : std::lower_bound(bounds_.begin(), bounds_.end(), v);
  counts_[static_cast<std::size_t>(at - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::uint64_t Histogram::count() const noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) n += bucket(i);
  return n;
}

// ---- Registration

Family& Registry::State::family(std::string_view name, std::string_view help, Type type) {
  auto it = families.find(name);
  if (it == families.end()) {
    if (!valid_metric_name(name)) misuse(name, "not a valid metric name");
    it = families.emplace(std::string(name), Family{.type = type, .help = std::string(help)}).first;
  }
  Family& f = it->second;
  if (f.type != type) {
    misuse(name, "registered as a " + std::string(type_name(f.type)) + ", now as a " + std::string(type_name(type)));
  }
  if (f.help != help) misuse(name, "registered with two help texts (take both from metrics/names.h)");
  return f;
}

Series& Registry::State::series(std::string_view name, Family& f, Labels labels) {
  std::sort(labels.begin(), labels.end());
  if (auto it = f.series.find(labels); it != f.series.end()) return it->second;

  std::vector<std::string> names;
  for (const auto& [label, value] : labels) {
    if (!valid_label_name(label)) misuse(name, "label \"" + label + "\" is not a valid label name");
    if (!names.empty() && names.back() == label) misuse(name, "label \"" + label + "\" given twice");
    if (f.type == Type::kHistogram && label == "le") misuse(name, "a histogram cannot have a label \"le\"");
    names.push_back(label);
  }
  if (f.series.empty() && f.label_names.empty()) f.label_names = names;
  if (names != f.label_names) misuse(name, "every series of a metric must have the same label names");

  std::string text = render(labels);
  Series& s = f.series[std::move(labels)];
  s.label_text = std::move(text);
  return s;
}

Registry::Registry() : state_(std::make_unique<State>()) {}
Registry::~Registry() = default;

Counter& Registry::counter(std::string_view name, std::string_view help, Labels labels) {
  std::lock_guard lock(state_->mu);
  Series& s = state_->series(name, state_->family(name, help, Type::kCounter), std::move(labels));
  if (s.computed()) misuse(name, "this series is already computed (counter_fn)");
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& Registry::gauge(std::string_view name, std::string_view help, Labels labels) {
  std::lock_guard lock(state_->mu);
  Series& s = state_->series(name, state_->family(name, help, Type::kGauge), std::move(labels));
  if (s.computed()) misuse(name, "this series is already computed (gauge_fn)");
  if (!s.gauge) s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& Registry::histogram(std::string_view name, std::string_view help, std::vector<double> bounds,
                               Labels labels) {
  std::lock_guard lock(state_->mu);
  Family& f = state_->family(name, help, Type::kHistogram);
  auto h = std::make_unique<Histogram>(std::move(bounds));  // checks and normalises the bounds
  if (!f.series.empty() && h->bounds() != f.bounds) {
    misuse(name, "every series of a histogram must have the same buckets");
  }
  Series& s = state_->series(name, f, std::move(labels));
  if (!s.histogram) {
    if (f.series.size() == 1) {  // the first series sets the family's buckets (histograms are never removed)
      f.bounds = h->bounds();
      f.le.clear();
      for (double b : f.bounds) append_number(f.le.emplace_back(), b);
      f.le.emplace_back("+Inf");
    }
    s.histogram = std::move(h);
  }
  return *s.histogram;
}

Registry::SeriesId Registry::State::set_computed(std::string_view name, std::string_view help, Type type, Labels labels,
                                                 std::function<double()> gauge_fn,
                                                 std::function<std::uint64_t()> counter_fn) {
  Family& f = family(name, help, type);
  Series& s = series(name, f, labels);
  if (s.counter || s.gauge) misuse(name, "this series is already a plain " + std::string(type_name(type)));
  computed.erase(s.fn_id);  // replaced: the old id must not remove the new function
  s.gauge_fn = std::move(gauge_fn);
  s.counter_fn = std::move(counter_fn);
  s.fn_id = next_id++;
  std::sort(labels.begin(), labels.end());
  computed.emplace(s.fn_id, std::pair{&f, std::move(labels)});
  return s.fn_id;
}

Registry::SeriesId Registry::gauge_fn(std::string_view name, std::string_view help, Labels labels,
                                      std::function<double()> fn) {
  std::lock_guard lock(state_->mu);
  return state_->set_computed(name, help, Type::kGauge, std::move(labels), std::move(fn), nullptr);
}

Registry::SeriesId Registry::counter_fn(std::string_view name, std::string_view help, Labels labels,
                                        std::function<std::uint64_t()> fn) {
  std::lock_guard lock(state_->mu);
  return state_->set_computed(name, help, Type::kCounter, std::move(labels), nullptr, std::move(fn));
}

void Registry::unregister(SeriesId id) {
  std::lock_guard lock(state_->mu);
  auto it = state_->computed.find(id);
  if (it == state_->computed.end()) return;
  auto& [family, labels] = it->second;
  family->series.erase(labels);
  state_->computed.erase(it);
}

// ---- Exposition

namespace {

void append_sample(std::string& out, std::string_view name, std::string_view suffix, std::string_view labels) {
  out += name;
  out += suffix;
  out += labels;
  out += ' ';
}

void append_histogram(std::string& out, std::string_view name, const Family& f, const Series& s) {
  const Histogram& h = *s.histogram;
  // Bucket labels: the series' own, then le. label_text is "" or "{...}".
  const std::string_view own = s.label_text;
  const std::string_view open = own.empty() ? "{" : own.substr(0, own.size() - 1);
  const std::string_view sep = s.label_text.empty() ? "" : ",";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < f.le.size(); ++i) {
    cumulative += h.bucket(i);
    out += name;
    out += "_bucket";
    out += open;
    out += sep;
    out += "le=\"";
    out += f.le[i];
    out += "\"} ";
    append_number(out, cumulative);
    out += '\n';
  }
  append_sample(out, name, "_sum", s.label_text);
  append_number(out, h.sum());
  out += '\n';
  append_sample(out, name, "_count", s.label_text);
  append_number(out, cumulative);  // equal to the +Inf bucket, as Prometheus requires
  out += '\n';
}

void append_series(std::string& out, std::string_view name, const Family& f, const Series& s) {
  if (s.histogram) return append_histogram(out, name, f, s);
  append_sample(out, name, "", s.label_text);
  if (s.counter) append_number(out, s.counter->value());
  else if (s.counter_fn) append_number(out, s.counter_fn());
  else if (s.gauge) append_number(out, s.gauge->value());
  else append_number(out, s.gauge_fn());
  out += '\n';
}

}  // namespace

std::string Registry::expose() const {
  std::lock_guard lock(state_->mu);
  std::string out;
  for (const auto& [name, f] : state_->families) {
    if (f.series.empty()) continue;
    out += "# HELP ";
    out += name;
    out += ' ';
    append_escaped(out, f.help, /*escape_quote=*/false);
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type_name(f.type);
    out += '\n';
    for (const auto& [labels, s] : f.series) append_series(out, name, f, s);
  }
  return out;
}

}  // namespace rk::metrics
