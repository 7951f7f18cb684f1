// cli/serve/fd_budget.h: one budget of file descriptors for every listener, planned at start.
//
// Every connection holds a descriptor (a gRPC one two: gRPC's, and its acceptor's watch on it, server/grpc/
// acceptor.h), and so does everything else the process opens. When they run out, accept() fails on every listener at
// once: /healthz and the admin listener stop answering with the rest. So the caps are planned against what the
// process may open (RLIMIT_NOFILE, whose soft limit serve raises to the hard one first):
//
//   limit = reserve (the process's own descriptors: event loops, files, Redis; plus room for connections on their
//           way in or out, refused ones included)
//         + admin listener's cap + 32 (files opened while serving: a rules reload, the state file, a Redis reconnect)
//         + --max-connections + 2 x --grpc-max-connections
//
// A cap given (a flag, or a settings file) that does not fit is an error naming it; a default that does not fit is
// lowered with a warning. At run time the public listeners also close at once a connection whose descriptor's number
// is fd_ceiling or more (descriptors are handed out lowest first: the process then holds that many), so that the
// admin listener and the process keep theirs even if a cap's arithmetic was wrong about the rest.
//
//   OpenFiles files = raise_open_files_limit();
//   FdBudget b = plan_fd_budget({.open_files = files.soft, .threads = 2, .http = {10000, false}, ...});
//   if (!b.error.empty()) ...exit 2; for (auto& w : b.warnings) ...log...
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rk::cli::serve {

struct OpenFiles {
  std::uint64_t soft = 0, hard = 0;  // RLIMIT_NOFILE in force (soft raised to hard where it could be)
  std::uint64_t was = 0;             // the soft limit before
};

// Raises the soft RLIMIT_NOFILE to the hard one (to the kernel's nr_open where the hard one is unlimited).
OpenFiles raise_open_files_limit();

struct Cap {
  std::size_t value = 0;
  bool given = false;  // by a flag or a settings file: an error if it does not fit; else lowered to fit
};

struct FdBudgetAsk {
  std::uint64_t open_files = 0;  // the soft RLIMIT_NOFILE in force
  int threads = 2;               // the public HTTP listener's
  Cap http;                      // --max-connections
  bool grpc = false;             // --grpc given
  int grpc_threads = 2;
  Cap grpc_max;  // --grpc-max-connections
};

struct FdBudget {
  std::size_t reserve = 0;    // the process's own descriptors, and connections on their way in or out
  std::size_t admin_max = 0;  // the admin listener's cap
  std::size_t http_max = 0, grpc_max = 0;
  int fd_ceiling = 0;                 // the public listeners' connections stay below this descriptor number
  std::vector<std::string> warnings;  // a default lowered to fit
  std::string error;                  // not empty: a cap given does not fit; nothing may start
};

// Files opened while serving, besides connections: a rules reload, the state file, a Redis reconnect.
inline constexpr std::size_t kTransientFiles = 32;

FdBudget plan_fd_budget(const FdBudgetAsk& ask);

}  // namespace rk::cli::serve
