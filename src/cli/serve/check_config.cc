// cli/serve/check_config.cc: `ratekeeper check-config`: the rules as `serve` would load them, checked.
#include <functional>
#include <iostream>

#include "cli/flag_set.h"
#include "rules/parse.h"
#include "cli/serve/serve.h"
#include "cli/serve/settings.h"

namespace rk::cli::serve {

namespace {

constexpr const char* kUsage =
    "usage: ratekeeper check-config [--merge-domains] [--settings FILE] PATH\n"
    "  PATH: a rules file or a directory of them (else the settings file's config)\n";

std::size_t count_rules(const std::vector<rules::DomainConfig>& domains) {
  std::size_t rules = 0;
  std::function<void(const std::vector<rules::Descriptor>&)> count = [&](const auto& list) {
    for (const auto& x : list) {
      rules += x.rate_limit ? 1 : 0;
      count(x.descriptors);
    }
  };
  for (const auto& d : domains) count(d.descriptors);
  return rules;
}

// PATH, --merge-domains and --skip-dotfiles over the settings files' config, merge-domains and skip-dotfiles; -1
// when they are fine, else the exit code, having said why.
int read_flags(const std::vector<std::string>& args, ServeFlags& flags) {
  std::string path;
  bool merge_domains = false, skip_dotfiles = false;
  std::vector<std::string> settings;
  cli::FlagSet command_line(kUsage);
  command_line.toggle("--merge-domains", "the files of one domain make one domain (as serve's flag)", merge_domains);
  command_line.toggle("--skip-dotfiles", "files named with a dot are not read (as serve's flag)", skip_dotfiles);
  command_line.value("--settings", "FILE", "serve's settings file: its config, merge-domains and skip-dotfiles",
                     cli::text_list(settings));
  command_line.positional("PATH", "a rules file or a directory of them", path);
  const cli::Parsed parsed = command_line.parse(args);
  if (parsed.help) {
    std::cout << command_line.help();
    return 0;
  }
  std::vector<std::string> errors;
  for (const cli::FlagProblem& p : parsed.problems) errors.push_back(p.to_string());
  for (const std::string& file : settings) {
    for (std::string& e : apply_settings(file, flags)) errors.push_back(std::move(e));
  }
  if (!path.empty()) flags.config = path;
  flags.merge_domains = flags.merge_domains || merge_domains;
  flags.skip_dotfiles = flags.skip_dotfiles || skip_dotfiles;
  if (errors.empty() && flags.config.empty()) errors.push_back("which rules? (PATH, or a settings file's config)");
  for (const std::string& e : errors) std::cerr << "ratekeeper check-config: " << e << "\n";
  if (errors.empty()) return -1;
  std::cerr << cli::help_hint("ratekeeper check-config");
  return 2;
}

}  // namespace

int run_check_config(const std::vector<std::string>& args) {
  ServeFlags flags;
  if (const int code = read_flags(args, flags); code >= 0) return code;
  std::vector<rules::DomainConfig> domains;
  const auto errors = rules::load_rules(flags.config, domains,
                                        {.merge_domains = flags.merge_domains, .skip_dotfiles = flags.skip_dotfiles});
  for (const auto& e : errors) std::cerr << e.to_string() << "\n";
  if (!errors.empty()) return 1;
  std::cout << flags.config << ": " << domains.size() << " domain(s), " << count_rules(domains) << " rule(s), valid\n";
  return 0;
}

}  // namespace rk::cli::serve
