// rules/ruleset.h: the active rules, immutable once built, and envoyproxy/ratelimit's matching over them.
//
// A RuleSet owns the parsed domains, a compiled descriptor tree per domain and one Limiter per rate_limit. It is
// built off to the side and swapped in whole (see rules/reloader.h); a rule whose identity (domain, descriptor path,
// algorithm and parameters) did not change keeps the previous set's Limiter, so its counters survive a reload.
//
// Thread safety: a built RuleSet is read-only; match() may be called from any thread. Limiters are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ratekeeper/concurrency.h"
#include "ratekeeper/limiter.h"
#include "rules/config.h"

namespace rk::rules {

struct Rule {
  std::string domain;
  std::string path;        // "key=value/key2": the descriptor path, for logs, metrics and dry runs
  std::string name;        // the rate_limit's name, or the path
  const RateLimit* limit;  // into the set's DomainConfig
  bool shadow_mode;        // the descriptor's or its domain's
  bool quota_mode;
  std::string metadata;                        // the descriptor's, as JSON ("" for none: Descriptor::metadata)
  std::shared_ptr<Limiter> limiter;            // null for unlimited, blocked and concurrency rules
  std::shared_ptr<ConcurrencyLimiter> leases;  // a concurrency rule's leases in memory; else null
  std::string identity;
  std::string store_prefix;  // "rk:<hash of identity>:": the rule's keys in a shared store (Redis) start with it
};

struct Entry {
  std::string_view key;
  std::string_view value;
};

struct Match {
  const Rule* rule = nullptr;  // null: no rule matched
  std::string counter_key;     // the limiter key for these entries
};

// Lookups by string_view in maps keyed by std::string, without building a string per lookup.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct BuildOptions {
  StoreOptions store;  // for every rule's limiter; its max_memory_bytes is shared equally among them
  std::shared_ptr<const Clock> clock;
};

class RuleSet {
 public:
  // Builds from validated configs; `previous` (may be null) lends limiters to unchanged rules.
  static std::shared_ptr<const RuleSet> build(std::vector<DomainConfig> domains, const RuleSet* previous,
                                              const BuildOptions& options, std::string version);

  // envoyproxy/ratelimit's matching of one descriptor: exact key=value first, then this level's wildcard values in
  // load order, then the key alone; the limit is the node reached by the last entry, if it has one.
  Match match(std::string_view domain, std::span<const Entry> entries) const;

  const DomainConfig* domain(std::string_view name) const;
  const std::vector<DomainConfig>& domains() const { return domains_; }
  const std::vector<std::unique_ptr<Rule>>& rules() const { return rules_; }
  const std::string& version() const { return version_; }
  std::chrono::system_clock::time_point loaded_at() const { return loaded_at_; }

  struct Node;  // the compiled descriptor tree, in ruleset.cc

 private:
  RuleSet() = default;

  std::vector<DomainConfig> domains_;
  std::vector<std::unique_ptr<Rule>> rules_;
  StringMap<std::size_t> domain_index_;
  std::vector<std::shared_ptr<Node>> roots_;  // per domain
  std::string version_;
  std::chrono::system_clock::time_point loaded_at_;
};

// Appends a value to a counter key as "<length>:<value>", so that no value can imitate a separator and two
// different sequences of values never make the same key.
void append_key_part(std::string& key, std::string_view value);
// The inverse: a counter key's values in order; nullopt if `key` is not in that form.
std::optional<std::vector<std::string_view>> split_key_parts(std::string_view key);

// '*' matches any run of characters (also none); everything else matches itself.
bool wildcard_match(std::string_view pattern, std::string_view value);

}  // namespace rk::rules
