// fuzz/forward_auth_fuzz.cc: forward-auth's reading of a proxied request (src/server/api/forward_auth.h): the
// client address through each proxy kind's headers and trusted proxies, descriptors from every kind of source, the
// path normaliser (src/server/api/uri_path.h), and the answer's header fields and body built from the values
// found (which the client chose).
//
// Input: the first byte picks one of the domains below, and (its high bits) the proxy kind, the path options and
// the prefix lengths; the rest is lines: the peer address, the method, the URI, the host, then header fields as
// "name: value".
//
// Properties: no more descriptors than configured; normalising a path twice changes nothing, and a normalised path
// starts with '/' and holds no "//", "/./" or "/../"; no CR, LF or NUL in any answer header.
#include <cstddef>
#include <climits>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "rules/parse.h"
#include "server/api/forward_auth.h"
#include "server/api/uri_path.h"

namespace {

constexpr std::string_view kDescriptors = R"(
  descriptors:
    - entries: [{key: remote_address, from: client_ip}]
    - entries: [{key: api_key, from: header, header: X-Api-Key}, {key: method, from: method}]
    - entries: [{key: path, from: path}, {key: prefix, from: path_prefix, segments: 2}, {key: host, from: host}]
    - entries: [{key: user, from: query, query: user}, {key: plan, from: value, value: free}]
)";

const std::vector<rk::rules::DomainConfig>& domains() {
  static const std::vector<rk::rules::DomainConfig> all = [] {
    const std::string heads[] = {
        "domain: a\nforward_auth:\n  trusted_proxies: [10.0.0.0/8, '::1', 192.168.0.0/16, 'fd00::/8']\n",
        "domain: b\nforward_auth:\n  trusted_proxies: [0.0.0.0/0, '::/0']\n",
        "domain: c\nforward_auth:\n  deny_status: 403\n",
    };
    std::vector<rk::rules::DomainConfig> out;
    for (const std::string& head : heads) {
      rk::rules::DomainConfig d;
      if (!rk::rules::parse_domain("fuzz.yaml", head + std::string(kDescriptors), d).empty()) __builtin_trap();
      out.push_back(std::move(d));
    }
    return out;
  }();
  return all;
}

std::string_view next_line(std::string_view& rest) {
  const std::size_t nl = rest.find('\n');
  const std::string_view line = rest.substr(0, nl);
  rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const rk::rules::DomainConfig& domain = domains()[data[0] % domains().size()];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  rk::server::api::ProxiedRequest r;
  r.peer_ip = next_line(rest);
  r.method = next_line(rest);
  r.uri = next_line(rest);
  r.host = next_line(rest);
  std::vector<rk::server::http::Field> fields;
  while (!rest.empty()) {
    const std::string_view line = next_line(rest);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    fields.push_back({line.substr(0, colon), value});
  }
  r.fields = fields;

  const std::uint8_t b = data[0] / 3;
  rk::server::api::ForwardAuthOptions options;
  options.proxy = static_cast<rk::server::api::ProxyKind>(b % 5);
  options.path = {.strip_params = (b & 8) == 0, .fold_case = (b & 16) != 0};
  options.prefixes = {.ipv4 = (b & 32) ? 24 : 32, .ipv6 = (b & 64) ? 48 : 64};

  const std::string once = rk::server::api::normalize_path(r.uri, options.path);
  if (rk::server::api::normalize_path(once, options.path) != once || once.empty() || once.front() != '/' ||
      once.find("//") != std::string::npos || once.find("/./") != std::string::npos ||
      once.find("/../") != std::string::npos || once.ends_with("/.") || once.ends_with("/..")) {
    __builtin_trap();
  }

  const auto built = rk::server::api::build_descriptors(domain, r, options);
  if (std::holds_alternative<rk::service::RequestError>(built)) {
    if (std::get<rk::service::RequestError>(built).field.empty()) __builtin_trap();  // an error names its header
    return 0;
  }
  const rk::service::CheckRequest& request = std::get<rk::service::CheckRequest>(built);
  if (request.domain != domain.domain || request.descriptors.size() > domain.forward_auth.descriptors.size()) {
    __builtin_trap();
  }
  // The answer, as if every descriptor found had its own limit: names and values come from the request.
  rk::service::CheckResponse response;
  std::uint32_t n = 0;
  for (const rk::service::CheckDescriptor& d : request.descriptors) {
    if (d.entries.empty()) __builtin_trap();
    rk::service::DescriptorStatus st;
    st.has_limit = true;
    for (const auto& [key, value] : d.entries) st.name += key + "=" + value + " ";
    st.requests_per_unit = 10 + n;
    st.limit_remaining = n % 3;
    st.window = rk::Nanos{1'000'000'000} * (n + 1);
    // From nothing to the most a saturated algorithm reports (a refusal that lasts "forever").
    static constexpr std::int64_t kDurations[] = {
        0, 1, 999'999'999, 1'000'000'001, 3'155'760'000'000'000'000, INT64_MAX - 1, INT64_MAX};
    st.duration_until_reset = rk::Nanos{kDurations[(st.name.size() + n) % std::size(kDurations)]};
    st.code = n % 2 ? rk::service::Code::kOverLimit : rk::service::Code::kOk;
    if (st.code == rk::service::Code::kOverLimit) response.overall = rk::service::Code::kOverLimit;
    response.statuses.push_back(std::move(st));
    ++n;
  }
  const rk::server::api::AuthAnswer answer = rk::server::api::auth_answer(response, domain.forward_auth.deny_status);
  for (const auto& [name, value] : answer.headers) {
    for (const char c : value) {
      // Header values must not let the client split the answer.
      if (c == '\r' || c == '\n' || c == '\0') __builtin_trap();
    }
  }
  return 0;
}
