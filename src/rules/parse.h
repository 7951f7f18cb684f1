// rules/parse.h: rules files (YAML) to DomainConfig, with every error named by file, line, column and reason.
//
//   std::vector<rk::rules::DomainConfig> domains;
//   auto errors = rk::rules::load_rules("/etc/ratekeeper/rules", domains);   // a file or a directory of them
//   for (const auto& e : errors) std::cerr << e.to_string() << "\n";       // rules.yaml:12:7: ...
#pragma once

#include <string>
#include <vector>

#include "rules/config.h"
#include "rules/files.h"

namespace rk::rules {

// Parses one file's text. `file` names it in errors. Returns every error found; `out` is meaningful only if none.
std::vector<ConfigError> parse_domain(const std::string& file, const std::string& text, DomainConfig& out);

struct LoadOptions {
  // envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG: the files of one domain make one domain (in file-name order); a
  // top-level key=value defined in two of them is an error naming both. Off: a domain in two files is an error.
  bool merge_domains = false;
  // serve without --redis: a domain saying `sharing: batched` has nothing to share through, an error at that line.
  bool without_redis = false;
  // upstream's RUNTIME_IGNOREDOTFILES (serve's --skip-dotfiles): a directory's files named with a dot are not read.
  bool skip_dotfiles = false;
};

// Loads a file, or every *.yaml / *.yml file of a directory (one domain a file unless merge_domains, sorted by
// name), as read_rules_files (rules/files.h) reads them: an entry that is not a regular file, or is too big, is an
// error naming it. Returns every error; `out` is meaningful only if none. `read`, if given, gets the files as
// parsed (the reloader's version is a hash of them); `stamp`, if given, their rules_stamp() (the reloader's poll
// compares it with what is on disk).
std::vector<ConfigError> load_rules(const std::string& path, std::vector<DomainConfig>& out,
                                    const LoadOptions& options = {}, std::vector<RulesFile>* read = nullptr,
                                    std::string* stamp = nullptr);

// Parses rules files already read (a directory's, or what a control plane pushed, each resource as a file: see
// rules/xds/convert.h), with load_rules' checks: one domain a file unless merge_domains, and the without_redis check.
// Returns every error; `out` is meaningful only if none.
std::vector<ConfigError> parse_rules_files(const std::vector<RulesFile>& files, std::vector<DomainConfig>& out,
                                           const LoadOptions& options = {});

// Maximum sizes, documented in docs/rules.md: a rules file over 16 MiB (kMaxRulesFileBytes, rules/files.h),
// descriptors nested deeper than 16 levels, or more than 100,000 descriptors in a file are refused.
inline constexpr int kMaxDepth = 16;
inline constexpr std::size_t kMaxDescriptors = 100'000;

}  // namespace rk::rules
