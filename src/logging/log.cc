#include "logging/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include "logging/repeat_limiter.h"

#include "base/json_string.h"

namespace rk::logging {

namespace {

using base::append_json_string;

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::mutex g_write;

}  // namespace

void set_log_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
bool log_enabled(Level level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

bool parse_log_level(std::string_view name, Level& out) {
  if (name == "debug") out = Level::kDebug;
  else if (name == "info") out = Level::kInfo;
  else if (name == "error") out = Level::kError;
  else return false;
  return true;
}

namespace {

using Fields = std::initializer_list<std::pair<std::string_view, std::string>>;

void write_line(Level level, std::string_view message, Fields fields) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[96];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  static constexpr const char* kNames[] = {"debug", "info", "error"};
  std::string line = "{\"ts\":\"";
  line += ts;
  line += "\",\"level\":\"";
  line += kNames[static_cast<int>(level)];
  line += "\",\"msg\":";
  append_json_string(line, message);
  for (const auto& [k, v] : fields) {
    line += ',';
    append_json_string(line, k);
    line += ':';
    append_json_string(line, v);
  }
  line += "}\n";
  std::lock_guard lock(g_write);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

RepeatLimiter& limiter() {
  // Never destroyed: other libraries' threads (gRPC's) may log while the process exits.
  static RepeatLimiter* const one = new RepeatLimiter({.lines = kRepeatLines, .interval = kRepeatInterval});
  return *one;
}

void report(const std::vector<RepeatLimiter::Held>& held) {
  for (const RepeatLimiter::Held& h : held) {
    write_line(h.level, "log lines suppressed",
               {{"event", h.event},
                {"suppressed", std::to_string(h.count)},
                {"interval", std::to_string(kRepeatInterval.count()) + "s"}});
  }
}

void limited(Level level, std::string_view event, std::string_view message, Fields fields) {
  std::vector<RepeatLimiter::Held> ended;
  const bool write = limiter().admit(event, level, ended);
  report(ended);
  if (write) write_line(level, message, fields);
}

}  // namespace

void log(Level level, std::string_view message, Fields fields) {
  if (!log_enabled(level)) return;
  if (level == Level::kDebug) return write_line(level, message, fields);
  limited(level, message, message, fields);
}

void log_event(Level level, std::string_view event, std::string_view message, Fields fields) {
  if (log_enabled(level)) limited(level, event, message, fields);
}

void report_held_lines() { report(limiter().drain()); }

}  // namespace rk::logging
