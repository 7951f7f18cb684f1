// logging/log.cc: log lines written whole, as JSON or text, a flood of one held back (see log.h).
#include "logging/log.h"

#include <algorithm>
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
std::atomic<int> g_format{static_cast<int>(Format::kJson)};
std::mutex g_write;

}  // namespace

void set_log_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
bool log_enabled(Level level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

void set_log_format(Format format) { g_format.store(static_cast<int>(format), std::memory_order_relaxed); }

bool parse_log_format(std::string_view name, Format& out) {
  if (name == "json") out = Format::kJson;
  else if (name == "text") out = Format::kText;
  else return false;
  return true;
}

std::string log_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[96];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return ts;
}

bool parse_log_level(std::string_view name, Level& out) {
  if (name == "debug") out = Level::kDebug;
  else if (name == "info") out = Level::kInfo;
  else if (name == "error") out = Level::kError;
  else return false;
  return true;
}

namespace {

using Fields = std::initializer_list<std::pair<std::string_view, std::string>>;

// A text value as it is when it is one plain word, else quoted as JSON quotes it.
void append_text_value(std::string& line, std::string_view v) {
  const bool plain = !v.empty() && std::none_of(v.begin(), v.end(), [](char c) {
    return c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f;
  });
  if (plain) line += v;
  else append_json_string(line, v);
}

std::string format_line(Format format, Level level, std::string_view message, Fields fields) {
  static constexpr const char* kNames[] = {"debug", "info", "error"};
  std::string line;
  if (format == Format::kText) {
    line = log_timestamp();
    line += ' ';
    line += kNames[static_cast<int>(level)];
    line += ' ';
    append_text_value(line, message);
    for (const auto& [k, v] : fields) {
      line += ' ';
      line += k;
      line += '=';
      append_text_value(line, v);
    }
    line += '\n';
    return line;
  }
  line = "{\"ts\":\"";
  line += log_timestamp();
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
  return line;
}

void write_line(Level level, std::string_view message, Fields fields) {
  const std::string line =
      format_line(static_cast<Format>(g_format.load(std::memory_order_relaxed)), level, message, fields);
  std::lock_guard lock(g_write);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

std::string format_log_line(Format format, Level level, std::string_view message, Fields fields) {
  return format_line(format, level, message, fields);
}

namespace {

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
