// ratekeeper: the command-line entry point. Subcommands live in src/cli; this file only dispatches.
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/flags.h"
#include "ratekeeper/ratekeeper.h"
#include "cli/replay.h"
#ifdef RK_HAVE_SIMULATE
#include "cli/simulate_command.h"
#endif
#ifdef RK_HAVE_SERVER
#include "cli/serve/serve.h"
#endif

namespace {

void usage(std::ostream& out) {
  out << "usage: ratekeeper <command> [flags]\n\n"
         "commands:\n"
#ifdef RK_HAVE_SERVER
         "  serve          run the service: rules from --config, HTTP decision API and forward-auth\n"
         "  check-config   validate a rules file or directory (exit 0 or 1)\n"
#endif
         "  replay         read '<time-seconds> <key> [cost]' lines from stdin, print one CSV decision per line\n"
#ifdef RK_HAVE_SIMULATE
         "  simulate       run a scenario file's traffic on a simulated clock, print CSV (docs/simulate.md)\n"
#endif
         "  version        print the version\n\n"
         "'ratekeeper <command> --help' lists a command's flags.\n\n"
         "limit flags (replay; simulate, where they override the scenario):\n"
      << rk::cli::limit_flags_help();
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string_view command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "replay") return rk::cli::run_replay(args, std::cin, std::cout, std::cerr);
#ifdef RK_HAVE_SIMULATE
  if (command == "simulate") return rk::cli::run_simulate(args, std::cout, std::cerr);
#endif
#ifdef RK_HAVE_SERVER
  if (command == "serve") return rk::cli::serve::run_serve(args);
  if (command == "check-config") return rk::cli::serve::run_check_config(args);
#endif
  if (command == "version" || command == "--version") {
    std::cout << "ratekeeper " << rk_version() << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    usage(std::cout);
    return 0;
  }
  std::cerr << "ratekeeper: unknown command '" << command << "'\nsee 'ratekeeper --help' for the commands\n";
  return 2;
}
