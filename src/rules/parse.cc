// rules/parse.cc: rules files to DomainConfig (rules/parse.h): one file's text through the reader (read_domain.cc
// and its parts), or a directory's files (as rules/files.h reads them), one domain each or merged by domain
// (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG).
#include "rules/parse.h"

#include <map>

#include "rules/reader.h"

namespace rk::rules {

std::vector<ConfigError> parse_domain(const std::string& file, const std::string& text, DomainConfig& out) {
  std::vector<ConfigError> errors;
  if (text.size() > kMaxRulesFileBytes) {
    errors.push_back({{file, 1, 1}, over_the_limit(text.size())});
    return errors;
  }
  yaml::read_document(text, file, errors, [&](const YAML::Node& root) {
    RulesReader r(file, errors);
    read_domain(r, root, out);
  });
  return errors;
}

namespace {

// A domain-level setting given in either file applies to the merged domain; given differently in both, it is an
// error (booleans cannot conflict: true in either file wins).
template <class T>
void merge_setting(T& into, const T& from, const char* name, const DomainConfig& a, const DomainConfig& b,
                   std::vector<ConfigError>& errors) {
  if (from == T{}) return;
  if (into != T{} && into != from) {
    errors.push_back({{b.file, 1, 1},
                      "domain '" + b.domain + "': " + name + " differs from its value in " + a.file +
                          " (a merged domain's setting is given in one file, or alike in all)"});
  }
  into = from;
}

// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG: the top-level descriptors of `from` join those of `into`; a key=value
// defined in both is an error naming both places.
void merge_domain(DomainConfig& into, DomainConfig&& from, std::vector<ConfigError>& errors) {
  std::map<std::pair<std::string, std::string>, SourcePos> seen;
  const auto id = [](const Descriptor& d) { return std::make_pair(d.key, d.value ? "=" + *d.value : std::string()); };
  for (const Descriptor& d : into.descriptors) seen.emplace(id(d), d.pos);
  for (std::size_t i = 0; i < from.descriptors.size(); ++i) {
    Descriptor& d = from.descriptors[i];
    if (const auto it = seen.find(id(d)); it != seen.end()) {
      errors.push_back({d.pos, "descriptors[" + std::to_string(i) + "]: the descriptor " + d.key +
                                   (d.value ? "=" + *d.value : "") + " of domain '" + into.domain +
                                   "' is already defined at " + it->second.file + ":" +
                                   std::to_string(it->second.line)});
      continue;
    }
    seen.emplace(id(d), d.pos);
    into.descriptors.push_back(std::move(d));
  }
  merge_setting(into.shadow_mode, from.shadow_mode, "shadow_mode", into, from, errors);
  merge_setting(into.all_or_nothing, from.all_or_nothing, "all_or_nothing", into, from, errors);
  merge_setting(into.store, from.store, "store", into, from, errors);
  merge_setting(into.redis_failure, from.redis_failure, "redis_failure", into, from, errors);
  if (from.sharing != Sharing::kDefault) into.sharing_pos = from.sharing_pos;
  merge_setting(into.sharing, from.sharing, "sharing", into, from, errors);
  if (from.forward_auth.enabled) {
    if (into.forward_auth.enabled) {
      errors.push_back({{from.file, 1, 1},
                        "domain '" + from.domain + "': forward_auth is also given in " + into.file +
                            " (a merged domain's forward_auth is given in one file)"});
    }
    into.forward_auth = std::move(from.forward_auth);
  }
}

}  // namespace

std::vector<ConfigError> load_rules(const std::string& path, std::vector<DomainConfig>& out, const LoadOptions& options,
                                    std::vector<RulesFile>* read, std::string* stamp) {
  std::vector<RulesFile> files;
  std::vector<ConfigError> errors = read_rules_files(path, files, stamp, options.skip_dotfiles);
  for (ConfigError& e : parse_rules_files(files, out, options)) errors.push_back(std::move(e));
  if (read) *read = std::move(files);
  return errors;
}

std::vector<ConfigError> parse_rules_files(const std::vector<RulesFile>& files, std::vector<DomainConfig>& out,
                                           const LoadOptions& options) {
  std::vector<ConfigError> errors;
  std::map<std::string, std::size_t> domains;  // domain -> its index in out
  for (const RulesFile& file : files) {
    const std::string& f = file.name;
    DomainConfig d;
    auto e = parse_domain(f, file.text, d);
    if (e.empty() && !d.domain.empty()) {
      const auto [it, fresh] = domains.emplace(d.domain, out.size());
      if (!fresh && options.merge_domains) {
        merge_domain(out[it->second], std::move(d), errors);
        continue;
      }
      if (!fresh) {
        e.push_back({{f, 1, 1},
                     "domain '" + d.domain + "' is already defined in " + out[it->second].file +
                         " (--merge-domains merges the files of one domain)"});
      }
    }
    errors.insert(errors.end(), e.begin(), e.end());
    out.push_back(std::move(d));
  }
  if (options.without_redis) {
    for (const DomainConfig& d : out) {
      if (d.sharing != Sharing::kBatched) continue;
      errors.push_back({d.sharing_pos, "sharing: batched needs Redis (serve --redis URL); domain '" + d.domain +
                                           "' has none to share through"});
    }
  }
  return errors;
}

}  // namespace rk::rules
