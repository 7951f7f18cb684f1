// logging/access_log.h: one JSON line per decision (serve's --access-log FILE, or - for stdout), itself limited:
// at most `per_second` lines a second on average, bursts of `burst`; the lines past that are dropped and counted,
// and the next line written is preceded by one saying how many were.
//
//   AccessLog log("/var/log/ratekeeper/access.log", {});
//   log.write(R"("domain":"edge","result":"OK")");  // {"ts":"2026-...Z","domain":"edge","result":"OK"}
//   {"ts":"...","msg":"access log lines dropped","dropped":1234}
//
// Thread safety: write() from any thread; each line is written whole, under one mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace rk::logging {

class AccessLog {
 public:
  using Now = std::function<std::chrono::steady_clock::time_point()>;  // a manual one in tests
  struct Options {
    double per_second = 1000;
    double burst = 1000;
  };
  // Opens `path` for appending ("-": stdout); throws std::invalid_argument naming the file and why it cannot.
  AccessLog(const std::string& path, Options options, Now now = std::chrono::steady_clock::now);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // `fields`: a JSON object's members without the braces; the line gets "ts" first.
  void write(std::string_view fields);
  std::uint64_t written() const;
  std::uint64_t dropped() const;  // in all

 private:
  Options options_;
  Now now_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  mutable std::mutex mu_;
  double tokens_;                                             // under mu_
  std::chrono::steady_clock::time_point last_;                // under mu_
  std::uint64_t written_ = 0, dropped_ = 0, unreported_ = 0;  // under mu_
};

// "2026-11-22T12:00:00.123Z": the time every log line carries.
std::string log_timestamp();

}  // namespace rk::logging
