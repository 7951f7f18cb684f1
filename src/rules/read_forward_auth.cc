// rules/read_forward_auth.cc: a rules file's `forward_auth:` (docs/proxies.md): the status a refusal answers,
// the proxies whose X-Forwarded-For is trusted, and how each descriptor's entries are taken from a request
// (client address, a header, the method, the path or its first segments, the host, a query parameter, a value).
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>

#include "rules/reader.h"

namespace rk::rules {

namespace {

bool parse_cidr(std::string_view text, Cidr& out) {
  std::string addr(text);
  int prefix = -1;
  if (const auto slash = addr.find('/'); slash != std::string::npos) {
    const std::string p = addr.substr(slash + 1);
    addr.resize(slash);
    int v = 0;
    const auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc{} || ptr != p.data() + p.size() || p.empty()) return false;
    prefix = v;
  }
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    if (prefix > 32) return false;
    std::memset(out.bytes, 0, 10);
    out.bytes[10] = out.bytes[11] = 0xff;
    std::memcpy(out.bytes + 12, &v4, 4);
    out.prefix = 96 + (prefix < 0 ? 32 : prefix);
    return true;
  }
  if (inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    if (prefix > 128) return false;
    std::memcpy(out.bytes, &v6, 16);
    out.prefix = prefix < 0 ? 128 : prefix;
    return true;
  }
  return false;
}

void trusted_proxies(RulesReader& r, const YAML::Node& t, const std::string& where, ForwardAuth& out) {
  if (!t.IsSequence()) {
    r.fail(t, where + ": expected a list of addresses or CIDR ranges");
    return;
  }
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    auto s = r.string(t[i], w);
    Cidr c;
    if (s && !parse_cidr(*s, c)) r.fail(t[i], w + ": '" + *s + "' is not an IP address or CIDR range");
    if (s) out.trusted_proxies.push_back(c);
  }
}

constexpr std::pair<std::string_view, Source> kSources[] = {{"client_ip", Source::kClientIp},
                                                            {"header", Source::kHeader},
                                                            {"method", Source::kMethod},
                                                            {"path", Source::kPath},
                                                            {"path_prefix", Source::kPathPrefix},
                                                            {"host", Source::kHost},
                                                            {"query", Source::kQuery},
                                                            {"value", Source::kValue}};

// One entry of a descriptor: its key, and where its value comes from. False if it cannot be read at all.
bool entry(RulesReader& r, const YAML::Node& e, const std::string& where, EntrySource& out) {
  if (!r.check_map(e, where, {"key", "from", "header", "query", "segments", "value"})) return false;
  if (!e["key"]) r.fail(e, where + ": needs a key");
  else out.key = r.string(e["key"], where + ".key").value_or("");
  const std::string from = e["from"] ? r.string(e["from"], where + ".from").value_or("") : "";
  const auto it = std::find_if(std::begin(kSources), std::end(kSources), [&](auto& s) { return s.first == from; });
  if (it == std::end(kSources)) {
    r.fail(e["from"] ? e["from"] : e, where + ".from: '" + from +
                                          "' is not a source (client_ip, header, method, path, path_prefix, host, "
                                          "query, value)");
    return false;
  }
  out.source = it->second;
  auto need = [&](const char* key) {
    if (!e[key]) {
      r.fail(e, where + ": from: " + from + " needs '" + key + "'");
      return std::string();
    }
    return r.string(e[key], where + "." + key).value_or("");
  };
  if (out.source == Source::kHeader) out.name = need("header");
  if (out.source == Source::kQuery) out.name = need("query");
  if (out.source == Source::kValue) out.name = need("value");
  if (e["segments"]) {
    if (out.source != Source::kPathPrefix) r.fail(e["segments"], where + ".segments: only with from: path_prefix");
    const auto s = r.uint32(e["segments"], where + ".segments");
    if (s && (*s < 1 || *s > 64)) r.fail(e["segments"], where + ".segments: must be from 1 to 64");
    if (s) out.segments = *s;
  }
  return true;
}

// `descriptors: [{entries: [...]}, ...]`: the descriptors a request is checked against, in order.
void descriptors(RulesReader& r, const YAML::Node& n, const std::string& where, ForwardAuth& out) {
  const YAML::Node d = n["descriptors"];
  if (!d || !d.IsSequence() || d.size() == 0) {
    r.fail(d ? d : n, where + ": expected a non-empty list, each {entries: [...]}");
    return;
  }
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    if (!r.check_map(d[i], w, {"entries"})) continue;
    const YAML::Node entries = d[i]["entries"];
    if (!entries || !entries.IsSequence() || entries.size() == 0) {
      r.fail(entries ? entries : d[i], w + ".entries: expected a non-empty list");
      continue;
    }
    std::vector<EntrySource> built;
    for (std::size_t j = 0; j < entries.size(); ++j) {
      EntrySource src;
      if (entry(r, entries[j], w + ".entries[" + std::to_string(j) + "]", src)) built.push_back(std::move(src));
    }
    out.descriptors.push_back(std::move(built));
  }
}

}  // namespace

void read_forward_auth(RulesReader& r, const YAML::Node& n, ForwardAuth& out) {
  const std::string where = "forward_auth";
  if (!r.check_map(n, where, {"deny_status", "trusted_proxies", "descriptors"})) return;
  out.enabled = true;
  if (n["deny_status"]) {
    const auto s = r.uint32(n["deny_status"], where + ".deny_status");
    if (s && (*s < 400 || *s > 599)) r.fail(n["deny_status"], where + ".deny_status: must be a 4xx or 5xx status");
    if (s) out.deny_status = static_cast<int>(*s);
  }
  if (n["trusted_proxies"]) trusted_proxies(r, n["trusted_proxies"], where + ".trusted_proxies", out);
  descriptors(r, n, where + ".descriptors", out);
}

}  // namespace rk::rules
