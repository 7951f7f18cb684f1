// logging/log.h: structured logs, one JSON object a line on stderr.
//
//   rk::logging::log(rk::logging::Level::kError, "rules rejected", {{"error", e.to_string()}});
//   {"ts":"2026-11-22T12:00:00.123Z","level":"error","msg":"rules rejected","error":"rules.yaml:3:5: ..."}
//
// Thread safety: log() may be called from any thread; each line is written whole.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace rk::logging {

enum class Level : int { kDebug = 0, kInfo = 1, kError = 2 };

void set_log_level(Level level);
bool log_enabled(Level level);
bool parse_log_level(std::string_view name, Level& out);

void log(Level level, std::string_view message,
         std::initializer_list<std::pair<std::string_view, std::string>> fields = {});

}  // namespace rk::logging
