#include "sim/simulate.h"

#include <queue>
#include <string>

#include "ratekeeper/limiter.h"

namespace rk::sim {

namespace {

// Every client's attempts in time order (ties: client order), with the sample instants interleaved before the
// attempts of the same instant. Memory is one pending time per client, however long the scenario.
class Walk {
 public:
  Walk(const Scenario& s, std::optional<Nanos> sample_every) : s_(s), step_(sample_every) {
    arrivals_.reserve(s.clients.size());
    for (std::size_t i = 0; i < s.clients.size(); ++i) {
      arrivals_.emplace_back(s.clients[i].pattern);
      if (auto t = arrivals_.back().next()) queue_.push({*t, i});
    }
  }

  // Calls on_sample(t) and on_attempt(t, client) in order. False once kMaxAttempts is passed.
  template <typename Sample, typename Attempt>
  bool run(Sample&& on_sample, Attempt&& on_attempt, std::string& error) {
    std::uint64_t k = 0;  // the next sample is at k * step, while that is within the duration
    std::uint64_t attempts = 0;
    for (;;) {
      const bool sample_left = step_ && static_cast<double>(k) * static_cast<double>(step_->count()) <=
                                            static_cast<double>(s_.duration.count());
      if (sample_left) {
        const Nanos t = *step_ * static_cast<std::int64_t>(k);
        if (queue_.empty() || t <= queue_.top().time) {
          on_sample(t);
          ++k;
          continue;
        }
      }
      if (queue_.empty()) return true;
      const Pending p = queue_.top();
      queue_.pop();
      if (++attempts > static_cast<std::uint64_t>(kMaxAttempts)) {
        error = "the scenario made more than " + std::to_string(static_cast<long long>(kMaxAttempts)) +
                " attempts (Poisson traffic above its mean); shorten it or lower the rates";
        return false;
      }
      on_attempt(p.time, p.client);
      if (auto t = arrivals_[p.client].next()) queue_.push({*t, p.client});
    }
  }

 private:
  struct Pending {
    Nanos time;
    std::size_t client;
    bool operator>(const Pending& o) const { return time != o.time ? time > o.time : client > o.client; }
  };

  const Scenario& s_;
  std::optional<Nanos> step_;
  std::vector<Arrivals> arrivals_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> queue_;
};

}  // namespace

bool simulate(const Scenario& scenario, const LimitSpec& spec, const std::function<void(const SimEvent&)>& on_event,
              std::string& error) {
  Limiter limiter(spec);
  Walk walk(scenario, scenario.sample_every);
  return walk.run(
      [&](Nanos t) {
        for (std::size_t i = 0; i < scenario.clients.size(); ++i) {
          on_event({t, i, false, limiter.peek_at(scenario.clients[i].key, t, 1)});
        }
      },
      [&](Nanos t, std::size_t i) {
        const ScenarioClient& c = scenario.clients[i];
        on_event({t, i, true, limiter.check_at(c.key, t, c.cost)});
      },
      error);
}

bool compare(const Scenario& scenario, std::vector<CompareRow>& rows, std::string& error) {
  Limiter exact(
      LimitSpec{.algorithm = Algorithm::kSlidingLog, .limit = scenario.spec.limit, .window = scenario.spec.window});
  std::vector<Limiter> limiters;
  rows.clear();
  for (const LimitSpec& spec : scenario.compare) {
    limiters.emplace_back(spec);
    rows.push_back({.spec = spec});
  }
  Walk walk(scenario, std::nullopt);
  return walk.run([](Nanos) {},
                  [&](Nanos t, std::size_t i) {
                    const ScenarioClient& c = scenario.clients[i];
                    const bool ok = exact.check_at(c.key, t, c.cost).allowed;
                    for (std::size_t a = 0; a < limiters.size(); ++a) {
                      const bool here = limiters[a].check_at(c.key, t, c.cost).allowed;
                      CompareRow& r = rows[a];
                      ++r.attempts;
                      r.allowed += here;
                      r.exact_allowed += ok;
                      r.wrongly_allowed += here && !ok;
                      r.wrongly_limited += !here && ok;
                    }
                  },
                  error);
}

}  // namespace rk::sim
