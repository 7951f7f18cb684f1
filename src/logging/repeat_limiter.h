// logging/repeat_limiter.h: at most `lines` lines of one event per interval; the lines held back past that are
// counted, and the counts handed back once the event's interval is over, for one line saying how many there were.
// What keeps a flood (a client opening thousands of connections that each fail) from flooding the log with it.
//
//   RepeatLimiter limiter({.lines = 10, .interval = std::chrono::seconds(10)});
//   std::vector<RepeatLimiter::Held> ended;
//   if (limiter.admit("grpc ssl_transport_security.cc:1501", Level::kError, ended)) write the line;
//   for (const auto& h : ended) write "log lines suppressed": h.event, h.count;
//
// An event's interval begins with its first line; the lines after the first `lines` of it are held back until it
// ends. The counts of intervals that ended are handed back by the next admit() (of any event), or by drain().
// At most max_events events are told apart at once; lines of more share one event, "(other events)".
//
// Thread safety: every member under one mutex; the clock is called under it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "logging/log.h"

namespace rk::logging {

class RepeatLimiter {
 public:
  using Now = std::function<std::chrono::steady_clock::time_point()>;  // a manual one in tests
  struct Options {
    std::size_t lines = 10;  // written per event per interval
    std::chrono::nanoseconds interval = std::chrono::seconds(10);
    std::size_t max_events = 1024;
  };
  struct Held {
    std::string event;
    std::uint64_t count = 0;     // lines not written
    Level level = Level::kInfo;  // that of the event's last line held back

    bool operator==(const Held&) const = default;
  };
  static constexpr std::string_view kOtherEvents = "(other events)";

  explicit RepeatLimiter(Options options, Now now = std::chrono::steady_clock::now);

  // Whether a line of `event` (at `level`) is written now. Appends to `ended` the counts of events whose interval
  // ended with lines held back: they are to be reported before this line.
  bool admit(std::string_view event, Level level, std::vector<Held>& ended);
  // Every count held back so far, intervals over or not (at exit); they are forgotten.
  std::vector<Held> drain();

 private:
  struct Event {
    std::chrono::steady_clock::time_point began;
    std::size_t written = 0;
    std::uint64_t held = 0;
    Level level = Level::kInfo;
  };
  using Map = std::unordered_map<std::string, Event>;
  void collect_ended(std::chrono::steady_clock::time_point now, std::vector<Held>& ended);  // under mu_

  const Options options_;
  const Now now_;
  std::mutex mu_;
  Map events_;  // under mu_
  // When the earliest interval holding lines back ends (max(): none does); under mu_.
  std::chrono::steady_clock::time_point next_end_ = std::chrono::steady_clock::time_point::max();
};

}  // namespace rk::logging
