// logging/log.h: structured logs, one JSON object a line on stderr (or, with --log-format text, key=value text).
//
//   rk::logging::log(rk::logging::Level::kError, "rules rejected", {{"error", e.to_string()}});
//   {"ts":"2026-11-22T12:00:00.123Z","level":"error","msg":"rules rejected","error":"rules.yaml:3:5: ..."}
//
// A flood of one event is not a flood of lines: past kRepeatLines lines of one event in kRepeatInterval, its lines
// are held back and counted (logging/repeat_limiter.h), and one line reports how many, once that interval is over:
//   {"ts":"...","level":"error","msg":"log lines suppressed","event":"grpc ssl_transport_security.cc:1501",
//    "suppressed":"27990","interval":"10s"}
// An event is a message, for lines at info and error (debug lines, asked for one by one, are not limited), or the
// source line of another library's line (log_event: gRPC's, protobuf's).
//
// Thread safety: log() may be called from any thread; each line is written whole.
#pragma once

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace rk::logging {

enum class Level : int { kDebug = 0, kInfo = 1, kError = 2 };
// kJson: the line above. kText: `2026-11-22T12:00:00.123Z error "rules rejected" error="rules.yaml:3:5: ..."`, the
// same fields as key=value, a value quoted (as JSON quotes it) unless it is one word without '"', '=' or '\'.
enum class Format : int { kJson = 0, kText = 1 };

void set_log_level(Level level);
bool log_enabled(Level level);
bool parse_log_level(std::string_view name, Level& out);
void set_log_format(Format format);
bool parse_log_format(std::string_view name, Format& out);  // "json" or "text"

inline constexpr std::size_t kRepeatLines = 10;
inline constexpr std::chrono::seconds kRepeatInterval{10};

void log(Level level, std::string_view message,
         std::initializer_list<std::pair<std::string_view, std::string>> fields = {});
// A line whose repeats are told apart by `event` rather than by the message (another library's, by its source
// line), limited at every level.
void log_event(Level level, std::string_view event, std::string_view message,
               std::initializer_list<std::pair<std::string_view, std::string>> fields = {});
// One line as `format` writes it, newline included (what log() writes, for tests).
std::string format_log_line(Format format, Level level, std::string_view message,
                            std::initializer_list<std::pair<std::string_view, std::string>> fields);
// Writes the counts of lines held back that no line has reported yet: at exit.
void report_held_lines();

}  // namespace rk::logging
