#include "cli/serve/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

namespace rk::cli::serve {

namespace {

// The process's own descriptors: standard streams, logs, the event loops of each listener's threads (an epoll set,
// an eventfd and a timer each, and a duplicate of the listening socket), gRPC's, and Redis's connections.
constexpr std::size_t kProcessFiles = 64;
constexpr std::size_t kPerThread = 4;

std::uint64_t nr_open() {
  std::ifstream in("/proc/sys/fs/nr_open");
  std::uint64_t n = 0;
  return in >> n && n > 0 ? n : std::uint64_t{1} << 20;
}

std::string why(const FdBudgetAsk& ask, const FdBudget& b, std::size_t avail) {
  return "the process may open " + std::to_string(ask.open_files) + " files (RLIMIT_NOFILE), of which " +
         std::to_string(b.reserve + b.admin_max + kTransientFiles) +
         " are kept for the process, the admin listener and connections on their way in or out; " +
         std::to_string(avail) + " are left for connections" + (ask.grpc ? " (each gRPC connection takes 2)" : "");
}

std::string too_many(const std::string& flags, const std::string& fix) {
  return flags + ": more connections than there are file descriptors for: " + fix +
         ", or raise the limit (ulimit -n; systemd's LimitNOFILE=)";
}

void lowered(FdBudget& b, const char* flag, std::size_t from, std::size_t to, const std::string& why_text) {
  if (from == to) return;
  b.warnings.push_back(std::string(flag) + " lowered from its default " + std::to_string(from) + " to " +
                       std::to_string(to) + ": " + why_text +
                       "; raise the limit (ulimit -n; systemd's LimitNOFILE=) "
                       "for more");
}

}  // namespace

OpenFiles raise_open_files_limit() {
  rlimit r{};
  OpenFiles out;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return out;
  out.was = out.soft = r.rlim_cur;
  out.hard = r.rlim_max;
  rlim_t want = r.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(nr_open()) : r.rlim_max;
  if (want > r.rlim_cur) {
    r.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &r) == 0) out.soft = want;
  }
  return out;
}

FdBudget plan_fd_budget(const FdBudgetAsk& ask) {
  FdBudget b;
  const std::size_t limit = static_cast<std::size_t>(std::min<std::uint64_t>(ask.open_files, 1u << 30));
  const auto threads = static_cast<std::size_t>(std::max(1, ask.threads));
  const auto grpc_threads = static_cast<std::size_t>(ask.grpc ? std::max(1, ask.grpc_threads) : 0);
  b.reserve = kProcessFiles + kPerThread * (threads + 1 + grpc_threads) + limit / 16;
  b.admin_max = std::clamp<std::size_t>(limit / 32, 8, 128);
  const std::size_t kept = b.reserve + b.admin_max + kTransientFiles;
  const std::size_t avail = limit > kept ? limit - kept : 0;
  b.fd_ceiling = static_cast<int>(limit > b.admin_max + kTransientFiles ? limit - b.admin_max - kTransientFiles : 0);
  const std::size_t least = 1 + (ask.grpc ? 2 : 0);  // one connection on each listener
  const std::string because = why(ask, b, avail);
  if (avail < least) {
    b.error = "the process may open only " + std::to_string(ask.open_files) + " files (RLIMIT_NOFILE, its hard " +
              "limit), and serve needs at least " + std::to_string(kept + least) + ": raise the limit (ulimit -n; " +
              "systemd's LimitNOFILE=)";
    return b;
  }
  const std::string http_flag = "--max-connections " + std::to_string(ask.http.value);
  const std::string grpc_flag = "--grpc-max-connections " + std::to_string(ask.grpc_max.value);
  if (!ask.grpc) {
    if (ask.http.given && ask.http.value > avail) {
      b.error = too_many(http_flag, because + ": give " + std::to_string(avail) + " or fewer");
      return b;
    }
    b.http_max = std::min(ask.http.value, avail);
    lowered(b, "--max-connections", ask.http.value, b.http_max, because);
    return b;
  }
  const std::size_t http = ask.http.value, grpc = ask.grpc_max.value;
  if (ask.http.given && ask.grpc_max.given) {
    if (http + 2 * grpc > avail) {
      b.error = too_many(http_flag + " with " + grpc_flag,
                         because + ": give fewer, --max-connections plus twice --grpc-max-connections at most " +
                             std::to_string(avail));
      return b;
    }
    b.http_max = http;
    b.grpc_max = grpc;
  } else if (ask.http.given) {
    if (http > avail - 2) {
      b.error = too_many(http_flag, because + ", and gRPC needs 2: give " + std::to_string(avail - 2) + " or fewer");
      return b;
    }
    b.http_max = http;
    b.grpc_max = std::min(grpc, (avail - http) / 2);
  } else if (ask.grpc_max.given) {
    if (2 * grpc > avail - 1) {
      b.error =
          too_many(grpc_flag, because + ", and HTTP needs 1: give " + std::to_string((avail - 1) / 2) + " or fewer");
      return b;
    }
    b.grpc_max = grpc;
    b.http_max = std::min(http, avail - 2 * grpc);
  } else {
    // Both defaults: each fits if it can within half of what is left, and takes what the other leaves.
    const std::size_t half = avail / 2;
    if (http <= half) {
      b.http_max = http;
      b.grpc_max = std::min(grpc, (avail - http) / 2);
    } else if (2 * grpc <= half) {
      b.grpc_max = grpc;
      b.http_max = std::min(http, avail - 2 * grpc);
    } else {
      b.http_max = half;
      b.grpc_max = (avail - half) / 2;
    }
  }
  if (!ask.http.given) lowered(b, "--max-connections", http, b.http_max, because);
  if (!ask.grpc_max.given) lowered(b, "--grpc-max-connections", grpc, b.grpc_max, because);
  return b;
}

}  // namespace rk::cli::serve
