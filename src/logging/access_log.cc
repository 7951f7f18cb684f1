// logging/access_log.cc: decisions' lines under a token bucket (see access_log.h).
#include "logging/access_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rk::logging {

AccessLog::AccessLog(const std::string& path, Options options, Now now)
    : options_(options), now_(std::move(now)), tokens_(options.burst), last_(now_()) {
  if (!(options_.per_second > 0) || !(options_.burst >= 1)) {
    throw std::invalid_argument("the access log's rate must be above 0 and its burst at least 1");
  }
  if (path == "-") {
    file_ = stdout;
    return;
  }
  file_ = std::fopen(path.c_str(), "ae");
  if (!file_) throw std::invalid_argument("cannot open '" + path + "' for appending: " + std::strerror(errno));
  owned_ = true;
}

AccessLog::~AccessLog() {
  if (owned_) std::fclose(file_);
}

void AccessLog::write(std::string_view fields) {
  std::lock_guard lock(mu_);
  const auto now = now_();
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(options_.burst, tokens_ + std::max(0.0, elapsed) * options_.per_second);
  if (tokens_ < 1) {
    ++dropped_;
    ++unreported_;
    return;
  }
  tokens_ -= 1;
  const std::string ts = log_timestamp();
  std::string line;
  if (unreported_ > 0) {
    line = "{\"ts\":\"" + ts + "\",\"msg\":\"access log lines dropped\",\"dropped\":" + std::to_string(unreported_) +
           "}\n";
    unreported_ = 0;
  }
  line += "{\"ts\":\"" + ts + "\"";
  if (!fields.empty()) line += ',';
  line += fields;
  line += "}\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
  ++written_;
}

std::uint64_t AccessLog::written() const {
  std::lock_guard lock(mu_);
  return written_;
}

std::uint64_t AccessLog::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace rk::logging
