#include "dashboard/what_if.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <vector>

#include "base/number_text.h"
#include "sim/scenario.h"
#include "sim/simulate.h"

namespace rk::dashboard {

namespace {

using nlohmann::json;

std::string num(double v) { return base::digits_number(v, 10); }

// The deepest nesting of arrays and objects in a JSON text (strings skipped), without recursion: the YAML reader
// the scenario goes through recurses, so depth is bounded before it sees anything.
std::size_t depth(std::string_view text) {
  std::size_t d = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++d);
    } else if ((c == ']' || c == '}') && d > 0) {
      --d;
    }
  }
  return deepest;
}

// The scenario reader's "<where>: <what>" as a field and a message. Its "needs ..." and "unknown key '...'" name
// the missing or unknown field in the message; the field is made to name it too.
WhatIfError split(const std::string& m) {
  const auto colon = m.find(": ");
  if (colon == std::string::npos || m.find(' ') < colon) return {"", m};
  std::string where = m.substr(0, colon);
  std::string what = m.substr(colon + 2);
  const std::string base = where == "scenario" ? "" : where;
  auto join = [&](std::string name) { return base.empty() ? name : base + "." + name; };
  if (what.starts_with("unknown key '")) {
    const auto end = what.find('\'', 13);
    if (end != std::string::npos) where = join(what.substr(13, end - 13));
  } else if (what.starts_with("needs ")) {
    std::string rest = what.substr(6);
    for (const char* article : {"a ", "an "}) {
      if (rest.starts_with(article)) rest = rest.substr(std::string_view(article).size());
    }
    const auto end = rest.find_first_of(" (");
    where = join(rest.substr(0, end));
  } else if (where == "scenario") {
    where = "";
  }
  return {where, what};
}

struct Stop {
  std::string message;
};

struct Series {
  std::uint64_t attempts = 0, allowed = 0;
  double first_refused = -1;
  std::vector<std::uint64_t> allowed_per_bucket, refused_per_bucket;
  std::vector<double> remaining;
  std::vector<double> estimate;
};

json limiter_json(const LimitSpec& s) {
  json j = {{"algorithm", algorithm_name(s.algorithm)},
            {"limit", s.limit},
            {"window_seconds", std::chrono::duration<double>(s.window).count()}};
  if (s.half_life) j["half_life_seconds"] = std::chrono::duration<double>(*s.half_life).count();
  if (s.burst) j["burst"] = *s.burst;
  if (s.capacity) j["capacity"] = *s.capacity;
  if (s.count_refused) j["count_refused"] = *s.count_refused;
  return j;
}

}  // namespace

std::variant<std::string, WhatIfError> run_what_if(std::string_view body, const WhatIfLimits& limits) {
  if (depth(body) > limits.max_depth) {
    return WhatIfError{"", "nested more than " + std::to_string(limits.max_depth) + " deep: a scenario is not"};
  }
  json request = json::parse(body, nullptr, false);
  if (request.is_discarded()) return WhatIfError{"", "not valid JSON (a scenario, as in docs/simulate.md)"};
  if (!request.is_object())
    return WhatIfError{"", "must be a JSON object: a scenario with duration, limiter and clients"};

  // JSON is YAML; the scenario reader takes it as it takes a file, with the same checks and messages. Re-dumped
  // with indentation, so that YAML's rules about flow-style spacing never see compact JSON.
  std::vector<sim::ScenarioError> errors;
  auto scenario = sim::parse_scenario(request.dump(1), "request", errors);
  if (!scenario) return split(errors.empty() ? std::string("not a valid scenario") : errors.front().message);
  sim::Scenario& s = *scenario;

  if (s.clients.size() > limits.max_clients) {
    return WhatIfError{"clients", "has " + std::to_string(s.clients.size()) +
                                      " clients (after count), over the limit of " +
                                      std::to_string(limits.max_clients) + " for a what-if"};
  }
  double expected = 0;
  for (std::size_t i = 0; i < s.clients.size(); ++i) {
    expected += sim::expected_attempts(s.clients[i].pattern);
    if (expected > limits.max_attempts) {
      return WhatIfError{"clients[" + std::to_string(i) + "]",
                         "the what-if would make about " + num(std::round(expected)) + " attempts, over the limit of " +
                             num(limits.max_attempts) + " (shorten it or lower the rates)"};
    }
  }
  const std::size_t nb = std::max<std::size_t>(1, limits.buckets);
  const double duration_ns = static_cast<double>(s.duration.count());
  if (!s.sample_every)
    s.sample_every =
        Nanos{std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(duration_ns / static_cast<double>(nb))))};
  const double rows = (std::floor(duration_ns / static_cast<double>(s.sample_every->count())) + 1) *
                      static_cast<double>(s.clients.size());
  if (rows > limits.max_sample_rows) {
    return WhatIfError{"sample_every", "would make " + num(rows) + " samples, over the limit of " +
                                           num(limits.max_sample_rows) + " for a what-if (sample less often)"};
  }

  std::vector<Series> series(s.clients.size());
  for (Series& c : series) {
    c.allowed_per_bucket.assign(nb, 0);
    c.refused_per_bucket.assign(nb, 0);
  }
  std::vector<double> sample_times;
  const auto deadline = std::chrono::steady_clock::now() + limits.max_time;
  std::uint64_t events = 0, attempts = 0;
  std::string error;
  bool ok = false;
  try {
    ok = sim::simulate(s, s.spec,
                       [&](const sim::SimEvent& e) {
                         if ((++events & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
                           throw Stop{"took longer than " + std::to_string(limits.max_time.count()) +
                                      " ms; shorten it or lower the rates"};
                         }
                         Series& c = series[e.client];
                         const double t = std::chrono::duration<double>(e.time).count();
                         if (!e.attempted) {
                           if (e.client == 0) sample_times.push_back(t);
                           c.remaining.push_back(e.decision.remaining);
                           if (e.decision.estimate) c.estimate.push_back(*e.decision.estimate);
                           return;
                         }
                         if (++attempts > static_cast<std::uint64_t>(2 * limits.max_attempts)) {
                           throw Stop{"made more than " + num(2 * limits.max_attempts) +
                                      " attempts (Poisson traffic far above its mean)"};
                         }
                         const auto b = std::min<std::size_t>(
                             nb - 1, static_cast<std::size_t>(static_cast<double>(e.time.count()) / duration_ns *
                                                              static_cast<double>(nb)));
                         ++c.attempts;
                         if (e.decision.allowed) {
                           ++c.allowed;
                           ++c.allowed_per_bucket[b];
                         } else {
                           ++c.refused_per_bucket[b];
                           if (c.first_refused < 0) c.first_refused = t;
                         }
                       },
                       error);
  } catch (const Stop& stop) {
    return WhatIfError{"", stop.message};
  } catch (const std::exception& e) {
    return WhatIfError{"limiter", e.what()};  // a limit the limiter refuses, or memory
  }
  if (!ok) return WhatIfError{"", error};

  json clients = json::array();
  std::uint64_t total = 0, allowed = 0;
  for (std::size_t i = 0; i < s.clients.size(); ++i) {
    Series& c = series[i];
    total += c.attempts;
    allowed += c.allowed;
    json j = {{"name", s.clients[i].name},
              {"key", s.clients[i].key},
              {"attempts", c.attempts},
              {"allowed", c.allowed},
              {"first_refused_seconds", c.first_refused < 0 ? json(nullptr) : json(c.first_refused)},
              {"allowed_per_bucket", std::move(c.allowed_per_bucket)},
              {"refused_per_bucket", std::move(c.refused_per_bucket)},
              {"remaining", std::move(c.remaining)}};
    if (!c.estimate.empty()) j["estimate"] = std::move(c.estimate);
    clients.push_back(std::move(j));
  }
  return json{{"limiter", limiter_json(s.spec)},
              {"duration_seconds", to_seconds(s.duration)},
              {"bucket_seconds", to_seconds(s.duration) / static_cast<double>(nb)},
              {"sample_times", std::move(sample_times)},
              {"attempts", total},
              {"allowed", allowed},
              {"clients", std::move(clients)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rk::dashboard
