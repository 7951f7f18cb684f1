// `serve`'s flags as a compatibility promise (docs/upgrading.md): every flag a released version's `serve --help`
// listed, recorded in tests/testdata/compat/serve_flags.txt with the default its help gave, is still listed with
// that default, and still read. A flag added passes; a flag removed or renamed, or a default changed, fails: within a
// major version, a broken promise.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "cli/serve/flags.h"
#include "support/compat_data.h"

namespace rk::cli::serve {
namespace {

// The flags `serve --help` lists (a line indented by two spaces, then the flag), each with the default its help
// gives: "--http 127.0.0.1:8080" for a help that says "(default 127.0.0.1:8080...", "--tls-cert" for one that gives
// none. A flag's help is its line and the indented lines after it.
std::set<std::string> listed_flags() {
  std::set<std::string> flags;
  std::istringstream in(serve_help());
  const std::regex flag(R"(^  (--[a-z0-9][a-z0-9-]*))"), given_default(R"(\(default ([^,;:) ]+))");
  std::string name, help;
  auto done = [&] {
    if (name.empty()) return;
    std::smatch d;
    flags.insert(std::regex_search(help, d, given_default) ? name + " " + d[1].str() : name);
  };
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, flag)) {
      done();
      name = m[1];
      help = line;
    } else if (!line.empty() && line[0] == ' ') {
      help += " " + line;
    } else {
      done();
      name.clear();
    }
  }
  done();
  return flags;
}

TEST(ServeFlagsCompat, EveryRecordedFlagIsStillListedAndRead) {
  const std::set<std::string> listed = listed_flags();
  ASSERT_GT(listed.size(), 50u) << serve_help();  // the parse found the flags, not a few words
  if (compat::recording()) {
    return compat::record("serve_flags.txt", compat::join(listed,
                                                          "# `ratekeeper serve --help`'s flags, as recorded "
                                                          "(tests/cli/serve/flags_compat_test.cc)\n"));
  }
  const std::set<std::string> recorded = compat::lines(compat::read("serve_flags.txt"));
  ASSERT_FALSE(recorded.empty());
  for (const std::string& line : recorded) {
    const std::string flag = line.substr(0, line.find(' '));
    EXPECT_TRUE(listed.count(line)) << "`" << line << "` is no longer in `serve --help`: a minor version may not "
                                    << "remove or rename a flag, or change its default (docs/upgrading.md)";
    EXPECT_TRUE(is_serve_flag(flag)) << flag << " is no longer read by serve";
  }
}

}  // namespace
}  // namespace rk::cli::serve
