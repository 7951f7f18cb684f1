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
  WhatIfError error;
};

struct Series {
  std::uint64_t attempts = 0, allowed = 0;
  double first_refused = -1;
  std::vector<std::uint64_t> allowed_per_bucket, refused_per_bucket;
  std::vector<double> remaining;
  std::vector<double> estimate;
};

json limiter_json(const LimitSpec& s) {
  json j = {{"algorithm", algorithm_name(s.algorithm)}, {"limit", s.limit}, {"window_seconds", to_seconds(s.window)}};
  if (s.half_life) j["half_life_seconds"] = to_seconds(*s.half_life);
  if (s.burst) j["burst"] = *s.burst;
  if (s.capacity) j["capacity"] = *s.capacity;
  if (s.count_refused) j["count_refused"] = *s.count_refused;
  return j;
}

// The request as a scenario, every bound checked from its text and numbers before anything is made of it: the
// body's size and nesting, then the scenario reader's own bounds, at the what-if's tightness.
std::variant<sim::Scenario, WhatIfError> read_request(std::string_view body, const WhatIfLimits& limits) {
  if (body.size() > limits.max_body_bytes) {
    return WhatIfError{"", "the body is " + std::to_string(body.size()) + " bytes, over the limit of " +
                               std::to_string(limits.max_body_bytes) + " for a what-if"};
  }
  if (depth(body) > limits.max_depth) {
    return WhatIfError{"", "nested more than " + std::to_string(limits.max_depth) + " deep: a scenario is not"};
  }
  json request = json::parse(body, nullptr, false);
  if (request.is_discarded()) return WhatIfError{"", "not valid JSON (a scenario, as in docs/simulate.md)"};
  if (!request.is_object())
    return WhatIfError{"", "must be a JSON object: a scenario with duration, limiter and clients"};

  // JSON is YAML; the scenario reader takes it as it takes a file, with the same checks and messages. Re-dumped
  // with indentation, so that YAML's rules about flow-style spacing never see compact JSON.
  const sim::ScenarioLimits bounds{.max_duration = limits.max_duration,
                                   .max_clients = limits.max_clients,
                                   .max_name_bytes = limits.max_name_bytes,
                                   .max_attempts = limits.max_attempts,
                                   .max_sample_rows = limits.max_sample_rows};
  std::vector<sim::ScenarioError> errors;
  auto scenario = sim::parse_scenario(request.dump(1), "request", errors, bounds);
  if (!scenario) return split(errors.empty() ? std::string("not a valid scenario") : errors.front().message);
  return std::move(*scenario);
}

// The scenario run into per-client series, stopped at its budget, when `stop` is asked, or when Poisson traffic
// runs far past its expected count (which the bounds were checked against).
std::optional<WhatIfError> run(const sim::Scenario& s, const WhatIfLimits& limits, std::stop_token stop,
                               std::vector<Series>& series, std::vector<double>& sample_times) {
  const std::size_t nb = series.front().allowed_per_bucket.size();
  const double duration_ns = static_cast<double>(s.duration.count());
  const auto deadline = std::chrono::steady_clock::now() + limits.max_time;
  std::uint64_t attempts = 0;
  std::string error;
  bool ok = false;
  try {
    ok = sim::simulate(
        s, s.spec,
        [&](const sim::SimEvent& e) {
          // Every step: one decision of a sliding log may walk its whole log.
          if (stop.stop_requested()) throw Stop{{"", "stopped: the admin listener is stopping", 503}};
          if (std::chrono::steady_clock::now() > deadline) {
            throw Stop{{"", "stopped at the what-if's budget of " + std::to_string(limits.max_time.count()) +
                                " ms of running: shorten it or lower the rates"}};
          }
          Series& c = series[e.client];
          const double t = to_seconds(e.time);
          if (!e.attempted) {
            if (e.client == 0) sample_times.push_back(t);
            c.remaining.push_back(e.decision.remaining);
            if (e.decision.estimate) c.estimate.push_back(*e.decision.estimate);
            return;
          }
          if (++attempts > static_cast<std::uint64_t>(2 * limits.max_attempts)) {
            throw Stop{{"", "made more than " + num(2 * limits.max_attempts) +
                                " attempts (Poisson traffic far above its mean)"}};
          }
          const auto b = std::min<std::size_t>(nb - 1, static_cast<std::size_t>(static_cast<double>(e.time.count()) /
                                                                                duration_ns * static_cast<double>(nb)));
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
  } catch (const Stop& stopped) {
    return stopped.error;
  } catch (const std::exception& e) {
    return WhatIfError{"limiter", e.what()};  // a limit the limiter refuses, or memory
  }
  if (!ok) return WhatIfError{"", error};
  return std::nullopt;
}

}  // namespace

WhatIfResult run_what_if(std::string_view body, const WhatIfLimits& limits, std::stop_token stop) {
  auto read = read_request(body, limits);
  if (auto* e = std::get_if<WhatIfError>(&read)) return std::move(*e);
  sim::Scenario& s = std::get<sim::Scenario>(read);

  // The default sampling: one a bucket, (buckets + 1) x clients rows, far within the bound on samples.
  const std::size_t nb = std::max<std::size_t>(1, limits.buckets);
  const double duration_ns = static_cast<double>(s.duration.count());
  if (!s.sample_every)
    s.sample_every =
        Nanos{std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(duration_ns / static_cast<double>(nb))))};
  std::vector<Series> series(s.clients.size());
  for (Series& c : series) {
    c.allowed_per_bucket.assign(nb, 0);
    c.refused_per_bucket.assign(nb, 0);
  }
  std::vector<double> sample_times;
  if (auto e = run(s, limits, stop, series, sample_times)) return std::move(*e);

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

WhatIfRunner::WhatIfRunner(WhatIfLimits limits)
    : limits_(limits), worker_([this](std::stop_token stop) { work(std::move(stop)); }) {}

WhatIfRunner::~WhatIfRunner() {
  worker_.request_stop();
  if (worker_.joinable()) worker_.join();
  if (job_) job_->done(WhatIfError{"", "not run: the admin listener is stopping", 503});
}

bool WhatIfRunner::submit(std::string body, std::function<void(WhatIfResult)> done) {
  {
    std::lock_guard lock(mu_);
    if (running_ || job_) return false;
    job_ = Job{std::move(body), std::move(done)};
  }
  wake_.notify_one();
  return true;
}

std::chrono::seconds WhatIfRunner::retry_after() const {
  return std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(limits_.max_time));
}

void WhatIfRunner::work(std::stop_token stop) {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      if (!wake_.wait(lock, stop, [&] { return job_.has_value(); })) return;
      job = std::move(*job_);
      job_.reset();
      running_ = true;
    }
    WhatIfResult result = run_what_if(job.body, limits_, stop);
    job.body = std::string();  // nothing of a what-if is kept past its answer
    {
      std::lock_guard lock(mu_);
      running_ = false;
    }
    job.done(std::move(result));
  }
}

}  // namespace rk::dashboard
