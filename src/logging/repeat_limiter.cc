#include "logging/repeat_limiter.h"

#include <algorithm>
#include <utility>

namespace rk::logging {

RepeatLimiter::RepeatLimiter(Options options, Now now) : options_(options), now_(std::move(now)) {}

bool RepeatLimiter::admit(std::string_view event, Level level, std::vector<Held>& ended) {
  std::lock_guard lock(mu_);
  const auto now = now_();
  // Past an interval that held lines back: events whose intervals are over are reported and forgotten; so too
  // before a new event is told apart from the others while they are max_events.
  if (now >= next_end_) collect_ended(now, ended);
  auto it = events_.find(std::string(event));
  if (it == events_.end()) {
    if (events_.size() >= options_.max_events) collect_ended(now, ended);
    const std::string_view key = events_.size() < options_.max_events ? event : kOtherEvents;
    it = events_.try_emplace(std::string(key), Event{.began = now}).first;
  }
  Event& e = it->second;
  if (now - e.began >= options_.interval) e = Event{.began = now};  // collect_ended() reported what it held
  if (e.written < options_.lines) {
    ++e.written;
    return true;
  }
  ++e.held;
  e.level = level;
  next_end_ = std::min(next_end_, e.began + options_.interval);
  return false;
}

void RepeatLimiter::collect_ended(std::chrono::steady_clock::time_point now, std::vector<Held>& ended) {
  next_end_ = std::chrono::steady_clock::time_point::max();
  for (auto it = events_.begin(); it != events_.end();) {
    Event& e = it->second;
    if (now - e.began < options_.interval) {
      if (e.held > 0) next_end_ = std::min(next_end_, e.began + options_.interval);
      ++it;
      continue;
    }
    if (e.held > 0) ended.push_back({.event = it->first, .count = e.held, .level = e.level});
    it = events_.erase(it);
  }
}

std::vector<RepeatLimiter::Held> RepeatLimiter::drain() {
  std::lock_guard lock(mu_);
  std::vector<Held> held;
  for (auto& [event, e] : events_) {
    if (e.held > 0) held.push_back({.event = event, .count = e.held, .level = e.level});
    e.held = 0;
  }
  next_end_ = std::chrono::steady_clock::time_point::max();
  return held;
}

}  // namespace rk::logging
