#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "metrics/names.h"

namespace rk::metrics {
namespace {

// ---- An independent reader of the text format (0.0.4), written from the spec, not from registry.cc.

struct Sample {
  std::string name;
  Labels labels;  // in the order written
  double value = 0;
};

struct Parsed {
  std::vector<Sample> samples;
  std::map<std::string, std::string> help;  // unescaped
  std::map<std::string, std::string> type;
  std::vector<std::string> errors;
};

bool name_char(char c, bool first, bool colon) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return letter || (!first && c >= '0' && c <= '9');
}

// Reads [a-zA-Z_:][a-zA-Z0-9_:]* (metric) or [a-zA-Z_][a-zA-Z0-9_]* (label) from s at i.
std::string read_name(std::string_view s, std::size_t& i, bool colon) {
  const std::size_t start = i;
  while (i < s.size() && name_char(s[i], i == start, colon)) ++i;
  return std::string(s.substr(start, i - start));
}

// Unescapes \\, \n and (when `quote`) \"; anything else after a backslash is an error.
bool unescape(std::string_view s, bool quote, std::string& out) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return false;
    if (s[i] == '\\') out += '\\';
    else if (s[i] == 'n') out += '\n';
    else if (s[i] == '"' && quote) out += '"';
    else return false;
  }
  return true;
}

bool parse_value(std::string_view s, double& v) {
  if (s == "+Inf") return v = std::numeric_limits<double>::infinity(), true;
  if (s == "-Inf") return v = -std::numeric_limits<double>::infinity(), true;
  if (s == "NaN") return v = std::nan(""), true;
  if (s.empty() || s[0] == '+') return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_sample(std::string_view line, Sample& out) {
  std::size_t i = 0;
  out.name = read_name(line, i, /*colon=*/true);
  if (out.name.empty()) return false;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      std::string label = read_name(line, i, /*colon=*/false);
      if (label.empty() || line.substr(i, 2) != "=\"") return false;
      i += 2;
      const std::size_t start = i;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      if (i >= line.size()) return false;
      std::string value;
      if (!unescape(line.substr(start, i - start), /*quote=*/true, value)) return false;
      out.labels.emplace_back(std::move(label), std::move(value));
      ++i;  // the closing quote
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i++ >= line.size()) return false;  // the closing brace
  }
  if (i >= line.size() || line[i] != ' ') return false;
  return parse_value(line.substr(i + 1), out.value);  // no timestamp: we never write one
}

// The family a sample belongs to: a histogram's _bucket, _sum and _count are its own.
std::string family_of(const Parsed& p, const std::string& name) {
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (name.ends_with(suffix)) {
      const std::string base = name.substr(0, name.size() - suffix.size());
      auto t = p.type.find(base);
      if (t != p.type.end() && t->second == "histogram") return base;
    }
  }
  return name;
}

void check_comment(Parsed& p, std::string_view line, const std::set<std::string>& done) {
  const bool help = line.starts_with("# HELP "), type = line.starts_with("# TYPE ");
  if (!help && !type) return;  // a plain comment
  std::size_t i = 7;
  const std::string name = read_name(line, i, /*colon=*/true);
  if (name.empty() || i >= line.size() || line[i] != ' ') {
    return p.errors.push_back("bad comment: " + std::string(line));
  }
  if (done.count(name)) p.errors.push_back("comment after the family's samples: " + std::string(line));
  const std::string_view rest = line.substr(i + 1);
  auto& slot = help ? p.help : p.type;
  if (slot.count(name)) p.errors.push_back("repeated: " + std::string(line));
  std::string text;
  if (help && !unescape(rest, /*quote=*/false, text)) p.errors.push_back("bad escape: " + std::string(line));
  if (type) text = rest;
  if (type && text != "counter" && text != "gauge" && text != "histogram" && text != "summary" && text != "untyped") {
    p.errors.push_back("unknown type: " + std::string(line));
  }
  slot[name] = text;
}

// Per histogram series (labels without le): buckets cumulative, le increasing up to +Inf, and _count the +Inf one.
void check_histograms(Parsed& p) {
  struct Buckets {
    std::vector<std::pair<double, double>> le_count;
    double count = -1;
  };
  std::map<std::pair<std::string, Labels>, Buckets> series;
  for (const Sample& s : p.samples) {
    const std::string family = family_of(p, s.name);
    if (family == s.name) continue;
    Labels labels = s.labels;
    double le = 0;
    if (s.name.ends_with("_bucket")) {
      const auto it = std::find_if(labels.begin(), labels.end(), [](const auto& l) { return l.first == "le"; });
      if (it == labels.end() || !parse_value(it->second, le)) {
        p.errors.push_back(s.name + ": bucket without a numeric le");
        continue;
      }
      labels.erase(it);
    }
    Buckets& b = series[{family, labels}];
    if (s.name.ends_with("_bucket")) b.le_count.emplace_back(le, s.value);
    if (s.name.ends_with("_count")) b.count = s.value;
  }
  for (const auto& [key, b] : series) {
    bool ok = !b.le_count.empty() && std::isinf(b.le_count.back().first) && b.le_count.back().second == b.count;
    for (std::size_t i = 1; i < b.le_count.size(); ++i) {
      ok = ok && b.le_count[i - 1].first < b.le_count[i].first && b.le_count[i - 1].second <= b.le_count[i].second;
    }
    if (!ok) p.errors.push_back(key.first + ": buckets not cumulative, or no +Inf bucket equal to _count");
  }
}

Parsed parse(const std::string& text) {
  Parsed p;
  if (!text.empty() && text.back() != '\n') p.errors.push_back("no newline at the end");
  std::istringstream in(text);
  std::set<std::string> done;  // families whose samples are over: each family's lines are contiguous
  std::string current;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) {
      check_comment(p, line, done);
      continue;
    }
    Sample s;
    if (!parse_sample(line, s)) {
      p.errors.push_back("not `name{labels} value`: " + line);
      continue;
    }
    const std::string family = family_of(p, s.name);
    if (family != current) {
      if (!current.empty()) done.insert(current);
      if (done.count(family)) p.errors.push_back("family's samples not contiguous: " + line);
      current = family;
    }
    if (!p.type.count(family) || !p.help.count(family)) p.errors.push_back("sample before # HELP and # TYPE: " + line);
    p.samples.push_back(std::move(s));
  }
  check_histograms(p);
  return p;
}

// Checks a registry's output as Prometheus would read it; returns what was read.
Parsed expect_valid(const Registry& r) {
  const std::string text = r.expose();
  Parsed p = parse(text);
  for (const auto& e : p.errors) ADD_FAILURE() << e << "\nin:\n" << text;
  return p;
}

// ---- The reader itself: it must refuse what Prometheus refuses, or the tests below prove nothing.

TEST(MetricsTextReader, RefusesMalformedLines) {
  const char* bad[] = {
      "# TYPE x gauge\n# HELP x h\nx{a=\"b} 1\n",                                 // unterminated value
      "# TYPE x gauge\n# HELP x h\nx 1,5\n",                                      // a decimal comma
      "# TYPE x gauge\n# HELP x h\nx{a=\"\\t\"} 1\n",                             // an escape the format does not have
      "# TYPE x gauge\n# HELP x h\nx  1\n",                                       // two spaces
      "# TYPE x gauge\n# HELP x h\n1x 1\n",                                       // a name starting with a digit
      "x 1\n",                                                                    // no HELP or TYPE
      "# TYPE x gauge\n# HELP x h\nx 1\n# TYPE y gauge\n# HELP y h\ny 1\nx 2\n",  // x split in two
      "# TYPE h histogram\n# HELP h h\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
      "# TYPE h histogram\n# HELP h h\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  // no +Inf
  };
  for (const char* text : bad) EXPECT_FALSE(parse(text).errors.empty()) << text;
  EXPECT_TRUE(parse("# TYPE x gauge\n# HELP x h\nx{a=\"1\",b=\"\\\"\"} -1.5e-07\n").errors.empty());
}

// ---- The registry

TEST(Registry, ExpositionText) {
  Registry r;
  r.counter("rk_requests_total", "Requests.", {{"route", "/v1/check"}, {"code", "429"}}).inc();
  r.counter("rk_requests_total", "Requests.", {{"route", "/v1/check"}, {"code", "200"}}).inc(3);
  r.gauge("rk_temperature", "A gauge.").set(-1.5);
  r.gauge_fn("rk_keys", "Computed.", {{"rule", "b"}}, [] { return 42.0; });
  r.gauge_fn("rk_keys", "Computed.", {{"rule", "a"}}, [] { return 7.0; });
  r.counter_fn("rk_evictions_total", "Computed counter.", {}, [] { return std::uint64_t{9}; });
  Histogram& h = r.histogram("rk_latency_seconds", "Latency.", {0.25, 1, 2.5}, {{"protocol", "http"}});
  for (double v : {0.125, 1.0, 2.0, 8.0}) h.observe(v);  // 1.0 is on a bound: `le` is inclusive
  r.histogram("rk_size_bytes", "Sizes.", {1024}).observe(1000);
  r.counter("rk_unused_total", "Registered, never counted.");

  EXPECT_EQ(r.expose(),
            "# HELP rk_evictions_total Computed counter.\n"
            "# TYPE rk_evictions_total counter\n"
            "rk_evictions_total 9\n"
            "# HELP rk_keys Computed.\n"
            "# TYPE rk_keys gauge\n"
            "rk_keys{rule=\"a\"} 7\n"
            "rk_keys{rule=\"b\"} 42\n"
            "# HELP rk_latency_seconds Latency.\n"
            "# TYPE rk_latency_seconds histogram\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"0.25\"} 1\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"1\"} 2\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"2.5\"} 3\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"+Inf\"} 4\n"
            "rk_latency_seconds_sum{protocol=\"http\"} 11.125\n"
            "rk_latency_seconds_count{protocol=\"http\"} 4\n"
            "# HELP rk_requests_total Requests.\n"
            "# TYPE rk_requests_total counter\n"
            "rk_requests_total{code=\"200\",route=\"/v1/check\"} 3\n"
            "rk_requests_total{code=\"429\",route=\"/v1/check\"} 1\n"
            "# HELP rk_size_bytes Sizes.\n"
            "# TYPE rk_size_bytes histogram\n"
            "rk_size_bytes_bucket{le=\"1024\"} 1\n"
            "rk_size_bytes_bucket{le=\"+Inf\"} 1\n"
            "rk_size_bytes_sum 1000\n"
            "rk_size_bytes_count 1\n"
            "# HELP rk_temperature A gauge.\n"
            "# TYPE rk_temperature gauge\n"
            "rk_temperature -1.5\n"
            "# HELP rk_unused_total Registered, never counted.\n"
            "# TYPE rk_unused_total counter\n"
            "rk_unused_total 0\n");
  EXPECT_EQ(expect_valid(r).samples.size(), 1u + 2 + 6 + 2 + 4 + 1 + 1);
}

TEST(Registry, EscapesLabelValuesAndHelp) {
  Registry r;
  const std::string nasty = "a\"b\\c\nd}{,=";
  r.counter("rk_x_total", "Help with \\ and \"quotes\"\nsecond line.", {{"v", nasty}}).inc();
  EXPECT_EQ(r.expose(),
            "# HELP rk_x_total Help with \\\\ and \"quotes\"\\nsecond line.\n"
            "# TYPE rk_x_total counter\n"
            "rk_x_total{v=\"a\\\"b\\\\c\\nd}{,=\"} 1\n");
  const Parsed p = expect_valid(r);
  ASSERT_EQ(p.samples.size(), 1u);
  EXPECT_EQ(p.samples[0].labels, (Labels{{"v", nasty}}));  // read back as written
  EXPECT_EQ(p.help.at("rk_x_total"), "Help with \\ and \"quotes\"\nsecond line.");
}

// The text of one gauge's value.
std::string gauge_text(double v) {
  Registry r;
  r.gauge("g", "h").set(v);
  const std::string text = r.expose();
  const std::size_t line = text.rfind("\ng ") + 3;
  return text.substr(line, text.size() - line - 1);
}

TEST(Registry, NumbersAsPrometheusReadsThem) {
  EXPECT_EQ(gauge_text(0.1), "0.1");
  EXPECT_EQ(gauge_text(1e-7), "1e-07");
  EXPECT_EQ(gauge_text(1763812345.0), "1763812345");  // a timestamp, whole
  EXPECT_EQ(gauge_text(1763812345.25), "1763812345.25");
  EXPECT_EQ(gauge_text(1e21), "1e+21");
  EXPECT_EQ(gauge_text(-0.0), "0");
  EXPECT_EQ(gauge_text(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(gauge_text(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(gauge_text(std::nan("")), "NaN");
  const double third = 1.0 / 3;
  double back = 0;
  ASSERT_TRUE(parse_value(gauge_text(third), back));
  EXPECT_EQ(back, third);  // shortest, yet exact

  Registry r;
  r.counter("c_total", "h").inc(std::numeric_limits<std::uint64_t>::max());
  EXPECT_NE(r.expose().find("\nc_total 18446744073709551615\n"), std::string::npos);
  r.histogram("d_seconds", "h", names::kDecisionDurationBuckets);
  const std::string text = r.expose();
  EXPECT_NE(text.find("d_seconds_bucket{le=\"1e-06\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_seconds_bucket{le=\"2.5e-06\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_seconds_bucket{le=\"0.25\"} 0\n"), std::string::npos) << text;
  expect_valid(r);
}

TEST(Registry, SameSeriesIsTheSameObject) {
  Registry r;
  Counter& a = r.counter("x_total", "h", {{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(&a, &r.counter("x_total", "h", {{"b", "2"}, {"a", "1"}}));  // label order does not matter
  EXPECT_NE(&a, &r.counter("x_total", "h", {{"a", "2"}, {"b", "2"}}));
  Gauge& g = r.gauge("g", "h");
  EXPECT_EQ(&g, &r.gauge("g", "h"));
  Histogram& h = r.histogram("h_seconds", "h", {1, 2}, {{"p", "x"}});
  EXPECT_EQ(&h, &r.histogram("h_seconds", "h", {1, 2, std::numeric_limits<double>::infinity()}, {{"p", "x"}}));

  // Threads racing to register one series all get it.
  std::vector<Counter*> got(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] { got[t] = &r.counter("raced_total", "h", {{"k", "v"}}); });
  }
  for (auto& t : threads) t.join();
  for (Counter* c : got) EXPECT_EQ(c, got[0]);
}

TEST(Registry, MisuseThrows) {
  Registry r;
  r.counter("x_total", "h", {{"a", "1"}});
  EXPECT_THROW(r.gauge("x_total", "h", {{"a", "1"}}), std::logic_error);  // another type
  EXPECT_THROW(r.histogram("x_total", "h", {1}, {{"a", "1"}}), std::logic_error);
  EXPECT_THROW(r.gauge_fn("x_total", "h", {{"a", "2"}}, [] { return 1.0; }), std::logic_error);
  EXPECT_THROW(r.counter("x_total", "other help", {{"a", "1"}}), std::logic_error);
  EXPECT_THROW(r.counter("x_total", "h", {{"b", "1"}}), std::logic_error);  // other label names
  EXPECT_THROW(r.counter("x_total", "h"), std::logic_error);
  EXPECT_THROW(r.counter("x_total", "h", {{"a", "1"}, {"b", "1"}}), std::logic_error);
  EXPECT_THROW(r.counter("y_total", "h", {{"a", "1"}, {"a", "2"}}), std::logic_error);  // a label twice
  for (const char* bad : {"", "1x", "a-b", "a b", "ä"}) {
    EXPECT_THROW(r.counter(bad, "h"), std::logic_error) << bad;
    EXPECT_THROW(r.counter("z_total", "h", {{bad, "v"}}), std::logic_error) << bad;
  }
  EXPECT_THROW(r.counter("z_total", "h", {{"__name__", "v"}}), std::logic_error);
  EXPECT_THROW(r.counter("z_total", "h", {{"a:b", "v"}}), std::logic_error);  // colons are for metric names
  EXPECT_THROW(r.histogram("h_seconds", "h", {1}, {{"le", "1"}}), std::logic_error);
  EXPECT_THROW(r.histogram("h_seconds", "h", {2, 1}), std::logic_error);
  EXPECT_THROW(r.histogram("h_seconds", "h", {1, 1}), std::logic_error);
  EXPECT_THROW(r.histogram("h_seconds", "h", {std::nan("")}), std::logic_error);
  r.histogram("h_seconds", "h", {1, 2}, {{"p", "a"}});
  EXPECT_THROW(r.histogram("h_seconds", "h", {1, 3}, {{"p", "b"}}), std::logic_error);  // other buckets
  r.gauge("g", "h", {{"k", "plain"}});
  EXPECT_THROW(r.gauge_fn("g", "h", {{"k", "plain"}}, [] { return 1.0; }), std::logic_error);
  r.gauge_fn("g", "h", {{"k", "computed"}}, [] { return 1.0; });
  EXPECT_THROW(r.gauge("g", "h", {{"k", "computed"}}), std::logic_error);
  EXPECT_NE(r.expose().find("x_total{a=\"1\"} 0"), std::string::npos);
  expect_valid(r);  // nothing half-registered shows
}

TEST(Registry, UnregisterRemovesComputedSeries) {
  Registry r;
  int calls = 0;
  const auto a = r.gauge_fn("keys", "h", {{"rule", "a"}}, [&] { return ++calls, 1.0; });
  const auto b = r.gauge_fn("keys", "h", {{"rule", "b"}}, [] { return 2.0; });
  const auto e = r.counter_fn("evictions_total", "h", {{"rule", "a"}}, [] { return std::uint64_t{3}; });
  EXPECT_EQ(r.expose(),
            "# HELP evictions_total h\n# TYPE evictions_total counter\nevictions_total{rule=\"a\"} 3\n"
            "# HELP keys h\n# TYPE keys gauge\nkeys{rule=\"a\"} 1\nkeys{rule=\"b\"} 2\n");
  r.unregister(a);
  r.unregister(e);
  EXPECT_EQ(r.expose(), "# HELP keys h\n# TYPE keys gauge\nkeys{rule=\"b\"} 2\n");
  EXPECT_EQ(calls, 1);  // never called once unregistered
  r.unregister(a);      // twice, or unknown: nothing happens
  r.unregister(12345);
  r.unregister(b);
  EXPECT_EQ(r.expose(), "");  // no series, no HELP or TYPE either

  // A reload registers the new rules' series before dropping the old ids: the new function stays.
  const auto old_id = r.gauge_fn("keys", "h", {{"rule", "a"}}, [] { return 1.0; });
  const auto new_id = r.gauge_fn("keys", "h", {{"rule", "a"}}, [] { return 5.0; });
  EXPECT_NE(old_id, new_id);
  r.unregister(old_id);
  EXPECT_EQ(r.expose(), "# HELP keys h\n# TYPE keys gauge\nkeys{rule=\"a\"} 5\n");
  r.unregister(new_id);
  EXPECT_EQ(r.expose(), "");
}

TEST(Histogram, Buckets) {
  Histogram h({1, 2});
  for (double v : {-5.0, 1.0, 1.5, 2.0, 3.0, std::nan("")}) h.observe(v);
  EXPECT_EQ(h.bucket(0), 2u);  // -5 and 1 (bounds are inclusive)
  EXPECT_EQ(h.bucket(1), 2u);  // 1.5 and 2
  EXPECT_EQ(h.bucket(2), 2u);  // 3 and NaN
  EXPECT_EQ(h.count(), 6u);
  EXPECT_TRUE(std::isnan(h.sum()));
  Histogram only_inf({});
  only_inf.observe(7);
  EXPECT_EQ(only_inf.bucket(0), 1u);
  EXPECT_EQ(only_inf.sum(), 7);
  EXPECT_THROW(Histogram({1, std::numeric_limits<double>::infinity(), 2}), std::invalid_argument);
}

TEST(Registry, ConcurrentUpdatesAreExact) {
  Registry r;
  Counter& c = r.counter("n_total", "h");
  Gauge& g = r.gauge("g", "h");
  Histogram& h = r.histogram("h_seconds", "h", {0.5, 1});
  std::atomic<bool> stop{false};
  std::thread scraper([&] {  // scrapes while the counts move; every scrape must still read right
    while (!stop.load()) expect_valid(r);
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i) {
        c.inc();
        g.add(i % 2 ? 1.0 : -0.5);
        h.observe(i % 2 ? 0.5 : 2.0);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  scraper.join();
  EXPECT_EQ(c.value(), 400'000u);
  EXPECT_EQ(g.value(), 100'000.0);  // every partial sum is a multiple of 0.5, so exact
  EXPECT_EQ(h.count(), 400'000u);
  EXPECT_EQ(h.bucket(0), 200'000u);
  EXPECT_EQ(h.bucket(1), 0u);
  EXPECT_EQ(h.bucket(2), 200'000u);
  EXPECT_EQ(h.sum(), 500'000.0);
}

TEST(MetricNames, OneListAllValid) {
  std::set<std::string_view> seen;
  Registry r;
  for (const names::Name& n : names::kAll) {
    EXPECT_TRUE(seen.insert(n.name).second) << n.name << " twice";
    // Ours, or envoyproxy/ratelimit's under the names its users know (its mappings' ratelimit_service_*).
    EXPECT_TRUE(n.name.starts_with("ratekeeper_") || n.name.starts_with("ratelimit_service_")) << n.name;
    EXPECT_FALSE(n.help.empty()) << n.name;
    EXPECT_NO_THROW(r.gauge_fn(n.name, n.help, {}, [] { return 0.0; })) << n.name;  // a valid metric name
  }
  const auto& b = names::kDecisionDurationBuckets;
  EXPECT_EQ(b.front(), 1e-6);
  EXPECT_EQ(b.back(), 1.0);
  EXPECT_NO_THROW(Histogram{b});  // strictly increasing
}

}  // namespace
}  // namespace rk::metrics
