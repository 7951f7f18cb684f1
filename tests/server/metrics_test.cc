#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <cmath>

#include <regex>
#include <sstream>
#include <thread>

namespace rk::metrics {
namespace {

TEST(Registry, ExpositionFormat) {
  Registry r;
  r.counter("rk_requests_total", "Requests.", {{"route", "/v1/check"}, {"code", "200"}}).inc(3);
  r.gauge("rk_temperature", "A gauge.").set(-1.5);
  const auto id = r.gauge_fn("rk_keys", "Computed.", {{"rule", "a\"b\\c\nd"}}, [] { return 42.0; });
  Histogram& h = r.histogram("rk_latency_seconds", "Latency.\nTwo lines.", {0.1, 1}, {{"protocol", "http"}});
  h.observe(0.05);
  h.observe(0.1);
  h.observe(5);
  EXPECT_EQ(r.expose(),
            "# HELP rk_keys Computed.\n"
            "# TYPE rk_keys gauge\n"
            "rk_keys{rule=\"a\\\"b\\\\c\\nd\"} 42\n"
            "# HELP rk_latency_seconds Latency.\\nTwo lines.\n"
            "# TYPE rk_latency_seconds histogram\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"0.1\"} 2\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"1\"} 2\n"
            "rk_latency_seconds_bucket{protocol=\"http\",le=\"+Inf\"} 3\n"
            "rk_latency_seconds_sum{protocol=\"http\"} 5.15\n"
            "rk_latency_seconds_count{protocol=\"http\"} 3\n"
            "# HELP rk_requests_total Requests.\n"
            "# TYPE rk_requests_total counter\n"
            "rk_requests_total{code=\"200\",route=\"/v1/check\"} 3\n"
            "# HELP rk_temperature A gauge.\n"
            "# TYPE rk_temperature gauge\n"
            "rk_temperature -1.5\n");
  r.unregister(id);
  EXPECT_EQ(r.expose().find("rk_keys"), std::string::npos);
}

TEST(Registry, EveryLineParses) {
  Registry r;
  r.counter("a_total", "x", {{"k", "v v"}}).inc();
  r.histogram("b_seconds", "y", {0.001, 0.5}).observe(0.2);
  r.gauge("c", "z", {{"x", "1"}, {"y", "2"}}).set(std::nan(""));
  const std::regex sample(R"re(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|-Inf|NaN)$)re");
  std::istringstream in(r.expose());
  int samples = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    ++samples;
  }
  EXPECT_EQ(samples, 1 + 5 + 1);
}

TEST(Registry, SameSeriesSameObjectAndTypesDoNotMix) {
  Registry r;
  Counter& a = r.counter("x_total", "h", {{"a", "1"}, {"b", "2"}});
  Counter& b = r.counter("x_total", "h", {{"b", "2"}, {"a", "1"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &r.counter("x_total", "h", {{"a", "2"}}));
  EXPECT_THROW(r.gauge("x_total", "h"), std::logic_error);
}

TEST(Registry, ConcurrentIncrementsAreExact) {
  Registry r;
  Counter& c = r.counter("n_total", "h");
  Histogram& h = r.histogram("h_seconds", "h", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100'000; ++i) {
        c.inc();
        h.observe(1.0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 400'000u);
  EXPECT_EQ(h.count(), 400'000u);
  EXPECT_EQ(h.sum(), 400'000.0);
}

}  // namespace
}  // namespace rk::metrics
