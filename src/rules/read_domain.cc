// rules/read_domain.cc: a rules file's top level (domain, its settings) and its tree of descriptors, each a
// key, an optional value, flags, an optional rate_limit (read_rate_limit.cc) and nested descriptors. Sizes are
// bounded (rules/parse.h: kMaxDepth, kMaxDescriptors) so that a file cannot exhaust the stack or memory.
#include <charconv>
#include <cmath>
#include <map>
#include <utility>

#include "base/json_string.h"
#include "base/number_text.h"
#include "rules/parse.h"
#include "rules/reader.h"

namespace rk::rules {

namespace {

// The descriptor tree of one file, with the count of descriptors read so far.
class DescriptorWalk {
 public:
  explicit DescriptorWalk(RulesReader& r) : r_(r) {}

  void descriptors(const YAML::Node& list, const std::string& where, int depth, std::vector<Descriptor>& out);

 private:
  void descriptor(const YAML::Node& n, const std::string& where, int depth, Descriptor& out);
  void flags(const YAML::Node& n, const std::string& here, Descriptor& out);

  RulesReader& r_;
  std::size_t count_ = 0;
};

constexpr int kMaxMetadataDepth = 32;

// A YAML scalar as JSON: plain true/false, null and numbers as themselves, the rest (and anything quoted) a string.
void scalar_json(const YAML::Node& n, std::string& out) {
  const std::string& s = n.Scalar();
  if (n.Tag() != "!") {
    if (s == "true" || s == "false" || s == "null") return void(out += s);
    if (s.empty() || s == "~") return void(out += "null");
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc{} && end == s.data() + s.size() && std::isfinite(v)) {
      return void(out += base::shortest_number(v));
    }
  }
  base::append_json_string(out, s);
}

// `metadata:` as JSON text; false if nested deeper than kMaxMetadataDepth.
bool metadata_json(const YAML::Node& n, int depth, std::string& out) {
  if (depth > kMaxMetadataDepth) return false;
  if (n.IsMap() || n.IsSequence()) {
    out += n.IsMap() ? '{' : '[';
    bool first = true;
    for (const auto& item : n) {
      if (!first) out += ',';
      first = false;
      if (n.IsMap()) {
        base::append_json_string(out, item.first.Scalar());
        out += ':';
        if (!metadata_json(item.second, depth + 1, out)) return false;
      } else if (!metadata_json(item, depth + 1, out)) {
        return false;
      }
    }
    out += n.IsMap() ? '}' : ']';
    return true;
  }
  if (n.IsScalar()) scalar_json(n, out);
  else out += "null";
  return true;
}

void DescriptorWalk::descriptors(const YAML::Node& list, const std::string& where, int depth,
                                 std::vector<Descriptor>& out) {
  // `descriptors:` with nothing after it: none (envoyproxy/ratelimit loads a placeholder domain this way).
  if (list.IsNull()) return;
  if (!list.IsSequence()) {
    r_.fail(list, where + ": expected a list of descriptors");
    return;
  }
  std::map<std::pair<std::string, std::string>, SourcePos> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    Descriptor d;
    descriptor(list[i], where + "[" + std::to_string(i) + "]", depth, d);
    const auto id = std::make_pair(d.key, d.value ? "=" + *d.value : std::string());
    if (!d.key.empty()) {
      const auto [it, fresh] = seen.emplace(id, d.pos);
      if (!fresh) {
        r_.fail(list[i], where + "[" + std::to_string(i) + "]: the descriptor " + d.key +
                             (d.value ? "=" + *d.value : "") + " is already defined at line " +
                             std::to_string(it->second.line));
      }
    }
    out.push_back(std::move(d));
  }
}

void DescriptorWalk::descriptor(const YAML::Node& n, const std::string& where, int depth, Descriptor& out) {
  out.pos = r_.pos(n);
  if (++count_ > kMaxDescriptors) {
    if (count_ == kMaxDescriptors + 1) {
      r_.fail(n, where + ": more than " + std::to_string(kMaxDescriptors) + " descriptors in one file");
    }
    return;
  }
  if (!r_.check_map(n, where,
                    {"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric",
                     "value_to_metric", "share_threshold", "metadata"})) {
    return;
  }
  if (!n["key"]) {
    r_.fail(n, where + ": needs a key");
  } else if (auto k = r_.string(n["key"], where + ".key")) {
    out.key = *k;
    if (out.key.empty()) r_.fail(n["key"], where + ".key: must not be empty");
  }
  if (n["value"]) {
    out.value = r_.string(n["value"], where + ".value");
    out.wildcard = out.value && out.value->find('*') != std::string::npos;
  }
  const std::string here = where + " (" + out.key + (out.value ? "=" + *out.value : "") + ")";
  if (n["rate_limit"]) {
    out.rate_limit.emplace();
    read_rate_limit(r_, n["rate_limit"], here + ".rate_limit", *out.rate_limit);
  }
  flags(n, here, out);
  if (n["metadata"] && !n["metadata"].IsMap()) {
    r_.fail(n["metadata"], here + ".metadata: expected a map");
  } else if (n["metadata"] && !metadata_json(n["metadata"], 0, out.metadata)) {
    r_.fail(n["metadata"], here + ".metadata: nested deeper than " + std::to_string(kMaxMetadataDepth) + " levels");
  }
  if (n["descriptors"]) {
    if (depth >= kMaxDepth) {
      r_.fail(n["descriptors"], here + ": descriptors nested deeper than " + std::to_string(kMaxDepth) + " levels");
    } else {
      descriptors(n["descriptors"], here + ".descriptors", depth + 1, out.descriptors);
    }
  }
}

void DescriptorWalk::flags(const YAML::Node& n, const std::string& here, Descriptor& out) {
  auto flag = [&](const char* key, bool& field) {
    if (n[key]) field = r_.boolean(n[key], here + "." + key).value_or(false);
  };
  flag("shadow_mode", out.shadow_mode);
  flag("quota_mode", out.quota_mode);
  flag("detailed_metric", out.detailed_metric);
  flag("value_to_metric", out.value_to_metric);
  flag("share_threshold", out.share_threshold);
  if (out.share_threshold && !out.wildcard) {
    r_.fail(n["share_threshold"], here + ".share_threshold: only for a value with a '*' wildcard");
  }
}

// The domain's own settings: where its counters live and what to do when that store cannot be reached.
void store_settings(RulesReader& r, const YAML::Node& root, DomainConfig& out) {
  if (root["store"]) {
    if (auto s = r.string(root["store"], "store")) {
      if (*s == "memory") out.store = StoreKind::kMemory;
      else if (*s == "redis") out.store = StoreKind::kRedis;
      else r.fail(root["store"], "store: unknown store '" + *s + "' (memory, redis)");
    }
  }
  if (root["sharing"]) {
    out.sharing_pos = r.pos(root["sharing"]);
    if (auto s = r.string(root["sharing"], "sharing")) {
      if (*s == "exact") out.sharing = Sharing::kExact;
      else if (*s == "batched") out.sharing = Sharing::kBatched;
      else r.fail(root["sharing"], "sharing: unknown sharing '" + *s + "' (exact, batched)");
    }
    if (out.sharing == Sharing::kBatched && out.store == StoreKind::kMemory) {
      r.fail(root["sharing"], "sharing: batched shares counters through Redis, and store: memory keeps them here");
    }
  }
  if (root["redis_failure"]) {
    if (auto s = r.string(root["redis_failure"], "redis_failure")) {
      if (auto p = parse_failure_policy(*s)) out.redis_failure = *p;
      else r.fail(root["redis_failure"], "redis_failure: unknown policy '" + *s + "' (fail_open, fail_closed, local)");
    }
  }
}

// A concurrency limit needs a release call, and a store that holds leases: forward-auth has no release call, and
// `sharing: batched` keeps no lease where the fleet can see it.
void concurrency_where_served(RulesReader& r, const std::vector<Descriptor>& descriptors, const DomainConfig& out) {
  for (const Descriptor& d : descriptors) {
    if (d.rate_limit && d.rate_limit->concurrency) {
      if (out.forward_auth.enabled) {
        r.fail(d.rate_limit->pos,
               "algorithm: concurrency cannot be served by forward_auth, which has no release "
               "call (acquire and release it at /v1/acquire and /v1/release)");
      }
      if (out.sharing == Sharing::kBatched) {
        r.fail(d.rate_limit->pos,
               "algorithm: concurrency cannot run with sharing: batched (leases are held in "
               "Redis exactly, or in memory)");
      }
    }
    concurrency_where_served(r, d.descriptors, out);
  }
}

}  // namespace

void read_domain(RulesReader& r, const YAML::Node& root, DomainConfig& out) {
  out.file = r.file();
  if (!root.IsMap()) {
    r.fail({r.file(), 1, 1}, "a rules file is a map with a domain and its descriptors");
    return;
  }
  r.check_map(root, "rules",
              {"domain", "descriptors", "defaults", "shadow_mode", "all_or_nothing", "forward_auth", "store",
               "redis_failure", "sharing"});
  if (!root["domain"]) {
    r.fail({r.file(), 1, 1}, "domain: missing (every rules file names its domain)");
  } else if (auto d = r.string(root["domain"], "domain")) {
    out.domain = *d;
    if (out.domain.empty()) r.fail(root["domain"], "domain: must not be empty");
  }
  if (root["defaults"]) read_defaults(r, root["defaults"]);
  if (root["shadow_mode"]) out.shadow_mode = r.boolean(root["shadow_mode"], "shadow_mode").value_or(false);
  if (root["all_or_nothing"]) out.all_or_nothing = r.boolean(root["all_or_nothing"], "all_or_nothing").value_or(false);
  store_settings(r, root, out);
  if (root["descriptors"]) DescriptorWalk(r).descriptors(root["descriptors"], "descriptors", 1, out.descriptors);
  if (root["forward_auth"]) read_forward_auth(r, root["forward_auth"], out.forward_auth);
  concurrency_where_served(r, out.descriptors, out);
}

}  // namespace rk::rules
