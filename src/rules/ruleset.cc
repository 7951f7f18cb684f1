#include "rules/ruleset.h"

#include "base/content_hash.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace rk::rules {

// One descriptor level: its nodes grouped for the three kinds of match.
struct RuleSet::Node {
  const Descriptor* config = nullptr;
  const Rule* rule = nullptr;
  // Children, by key: exact values, wildcard values in load order, and the key-only default.
  struct ByKey {
    StringMap<const Node*> exact;
    std::vector<const Node*> wildcards;
    const Node* any = nullptr;
  };
  StringMap<ByKey> children;
  std::vector<std::unique_ptr<Node>> owned;
};

namespace {

// count_refused's part: 2 where it is absent, and where it is off on an algorithm that had no count_refused before
// debts (all but earrrl and fixed_window), so that those rules keep the identity, Redis keys and state-file entries
// they had (docs/upgrading.md: a minor keeps the Redis layout).
int count_refused_part(const LimitSpec& s) {
  if (!s.count_refused) return 2;
  if (*s.count_refused) return 1;
  return s.algorithm == Algorithm::kEarrrl || s.algorithm == Algorithm::kFixedWindow ? 0 : 2;
}

std::string fingerprint(const LimitSpec& s, bool calendar, bool shared) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s|%.17g|%lld|%lld|%.17g|%.17g|%d|%d|%d",
                std::string(algorithm_name(s.algorithm)).c_str(), s.limit, static_cast<long long>(s.window.count()),
                static_cast<long long>(s.half_life.value_or(Nanos{0}).count()), s.burst.value_or(-1),
                s.capacity.value_or(-1), count_refused_part(s), calendar ? 1 : 0, shared ? 1 : 0);
  return buf;
}

// Rules that get a limiter of their own.
std::size_t limited_rules(const std::vector<Descriptor>& descriptors) {
  std::size_t n = 0;
  for (const Descriptor& d : descriptors) {
    n += d.rate_limit && !d.rate_limit->unlimited && !d.rate_limit->blocked && !d.rate_limit->concurrency;
    n += limited_rules(d.descriptors);
  }
  return n;
}

struct Builder {
  const RuleSet* previous;
  const BuildOptions& options;
  StoreOptions store;  // options.store with each rule's share of the memory budget
  std::vector<std::unique_ptr<Rule>>& rules;

  void add(RuleSet::Node& parent, const DomainConfig& domain, const Descriptor& d, const std::string& parent_path,
           const std::string& parent_identity) {
    auto node = std::make_unique<RuleSet::Node>();
    node->config = &d;
    const std::string step = d.key + (d.value ? "=" + *d.value : "");
    const std::string path = parent_path.empty() ? step : parent_path + "/" + step;
    // Identity: the path with lengths, so no key or value can imitate a separator.
    const std::string identity = parent_identity + std::to_string(d.key.size()) + ":" + d.key +
                                 (d.value ? std::to_string(d.value->size()) + "=" + *d.value : std::string("-"));
    if (d.rate_limit) {
      auto rule = std::make_unique<Rule>();
      rule->domain = domain.domain;
      rule->path = path;
      rule->name = d.rate_limit->name.empty() ? path : d.rate_limit->name;
      rule->limit = &*d.rate_limit;
      rule->shadow_mode = d.shadow_mode || domain.shadow_mode;
      rule->quota_mode = d.quota_mode;
      rule->metadata = d.metadata;
      if (const auto& c = d.rate_limit->concurrency) {
        rule->identity = domain.domain + "\n" + identity + "\nconcurrency " + std::to_string(c->max_in_flight) + " " +
                         std::to_string(c->lease_ttl.count());
        rule->store_prefix = "rk:" + base::content_hash(rule->identity) + ":";
        const Rule* before = reuse_rule(rule->identity);
        rule->leases = before ? before->leases : std::make_shared<ConcurrencyLimiter>(*c, options.clock);
      } else if (!d.rate_limit->unlimited && !d.rate_limit->blocked) {
        rule->identity = domain.domain + "\n" + identity + "\n" +
                         fingerprint(d.rate_limit->spec, d.rate_limit->calendar, d.share_threshold);
        rule->store_prefix = "rk:" + base::content_hash(rule->identity) + ":";
        rule->limiter = reuse(rule->identity);
        if (!rule->limiter) rule->limiter = std::make_shared<Limiter>(d.rate_limit->spec, store, options.clock);
      }
      node->rule = rule.get();
      rules.push_back(std::move(rule));
    }
    for (const Descriptor& child : d.descriptors) add(*node, domain, child, path, identity + "/");
    auto& by_key = parent.children[d.key];
    const RuleSet::Node* raw = node.get();
    if (!d.value) {
      by_key.any = raw;
    } else if (d.wildcard) {
      by_key.wildcards.push_back(raw);
    } else {
      by_key.exact.emplace(*d.value, raw);
    }
    parent.owned.push_back(std::move(node));
  }

  std::shared_ptr<Limiter> reuse(const std::string& identity) const {
    const Rule* r = reuse_rule(identity);
    return r ? r->limiter : nullptr;
  }

  const Rule* reuse_rule(const std::string& identity) const {
    if (!previous) return nullptr;
    for (const auto& r : previous->rules()) {
      if (r->identity == identity) return r.get();
    }
    return nullptr;
  }
};

}  // namespace

void append_key_part(std::string& key, std::string_view v) {
  key += std::to_string(v.size());
  key += ':';
  key += v;
}

std::optional<std::vector<std::string_view>> split_key_parts(std::string_view key) {
  std::vector<std::string_view> parts;
  while (!key.empty()) {
    std::size_t len = 0;
    const auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), len);
    const auto digits = static_cast<std::size_t>(p - key.data());
    if (ec != std::errc{} || digits == 0 || digits >= key.size() || key[digits] != ':' ||
        len > key.size() - digits - 1) {
      return std::nullopt;
    }
    parts.push_back(key.substr(digits + 1, len));
    key.remove_prefix(digits + 1 + len);
  }
  return parts;
}

std::shared_ptr<const RuleSet> RuleSet::build(std::vector<DomainConfig> domains, const RuleSet* previous,
                                              const BuildOptions& options, std::string version) {
  std::shared_ptr<RuleSet> set(new RuleSet());
  set->domains_ = std::move(domains);
  set->version_ = std::move(version);
  set->loaded_at_ = std::chrono::system_clock::now();
  Builder builder{previous, options, options.store, set->rules_};
  if (options.store.max_memory_bytes) {
    std::size_t n = 0;
    for (const DomainConfig& d : set->domains_) n += limited_rules(d.descriptors);
    builder.store.max_memory_bytes = options.store.max_memory_bytes / std::max<std::size_t>(1, n);
  }
  for (std::size_t i = 0; i < set->domains_.size(); ++i) {
    const DomainConfig& d = set->domains_[i];
    auto root = std::make_shared<Node>();
    for (const Descriptor& desc : d.descriptors) builder.add(*root, d, desc, "", "");
    set->domain_index_.emplace(d.domain, i);
    set->roots_.push_back(std::move(root));
  }
  return set;
}

const DomainConfig* RuleSet::domain(std::string_view name) const {
  const auto it = domain_index_.find(name);
  return it == domain_index_.end() ? nullptr : &domains_[it->second];
}

Match RuleSet::match(std::string_view domain, std::span<const Entry> entries) const {
  Match m;
  const auto it = domain_index_.find(domain);
  if (it == domain_index_.end() || entries.empty()) return m;
  const Node* level = roots_[it->second].get();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto by_key = level->children.find(entries[i].key);
    if (by_key == level->children.end()) return {};
    const Node::ByKey& k = by_key->second;
    const Node* next = nullptr;
    if (const auto exact = k.exact.find(entries[i].value); exact != k.exact.end()) next = exact->second;
    if (!next) {
      for (const Node* w : k.wildcards) {
        if (wildcard_match(*w->config->value, entries[i].value)) {
          next = w;
          break;
        }
      }
    }
    if (!next) next = k.any;
    if (!next) return {};
    // A wildcard rule with share_threshold counts every matching value together.
    append_key_part(m.counter_key,
                    next->config->share_threshold ? std::string_view(*next->config->value) : entries[i].value);
    if (i + 1 == entries.size()) {
      m.rule = next->rule;
      if (!m.rule) m.counter_key.clear();
      return m;
    }
    if (next->children.empty()) return {};
    level = next;
  }
  return {};
}

bool wildcard_match(std::string_view pattern, std::string_view value) {
  // Greedy matching with backtracking to the last '*': linear in practice, never exponential.
  std::size_t p = 0, v = 0, star = std::string_view::npos, mark = 0;
  while (v < value.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = v;
    } else if (p < pattern.size() && pattern[p] == value[v]) {
      ++p;
      ++v;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      v = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace rk::rules
