#include "server/api/forward_auth.h"

#include <arpa/inet.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "headers/rate_limit_headers.h"

namespace rk::api {

namespace {

struct Address {
  std::uint8_t bytes[16] = {};
  bool ok = false;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Address parse_ip(std::string_view text) {
  Address a;
  text = trim(text);
  if (text.size() > 64) return a;
  std::string s(text);
  // "[v6]:port" and "v4:port" as some proxies write them.
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string::npos) return a;
    s = s.substr(1, close - 1);
  } else if (std::count(s.begin(), s.end(), ':') == 1) {
    s.resize(s.find(':'));
  }
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    a.bytes[10] = a.bytes[11] = 0xff;
    std::memcpy(a.bytes + 12, &v4, 4);
    a.ok = true;
  } else if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(a.bytes, &v6, 16);
    a.ok = true;
  }
  return a;
}

std::string format_ip(const Address& a) {
  char buf[INET6_ADDRSTRLEN];
  static const std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(a.bytes, kMapped, 12) == 0) {
    inet_ntop(AF_INET, a.bytes + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, a.bytes, buf, sizeof buf);
  }
  return buf;
}

bool in_range(const Address& a, const rules::Cidr& c) {
  int bits = c.prefix;
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const auto mask = static_cast<std::uint8_t>(bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff);
    if ((a.bytes[i] & mask) != (c.bytes[i] & mask)) return false;
  }
  return true;
}

bool trusted(const Address& a, const std::vector<rules::Cidr>& list) {
  return a.ok && std::any_of(list.begin(), list.end(), [&](const rules::Cidr& c) { return in_range(a, c); });
}

std::string_view path_of(std::string_view uri) { return uri.substr(0, uri.find_first_of("?#")); }

std::string path_prefix(std::string_view uri, std::uint32_t segments) {
  const std::string_view path = path_of(uri);
  std::size_t end = 0;
  for (std::uint32_t i = 0; i < segments; ++i) {
    const std::size_t next = path.find('/', end + 1);
    if (next == std::string_view::npos) return std::string(path);
    end = next;
  }
  return std::string(path.substr(0, end));
}

std::optional<std::string> query_param(std::string_view uri, std::string_view name) {
  const auto q = uri.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = uri.substr(q + 1);
  rest = rest.substr(0, rest.find('#'));
  while (!rest.empty()) {
    const std::string_view pair = rest.substr(0, rest.find('&'));
    rest.remove_prefix(std::min(rest.size(), pair.size() + 1));
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
  }
  return std::nullopt;
}

}  // namespace

std::string client_ip(const ProxiedRequest& r, const std::vector<rules::Cidr>& trusted_proxies) {
  const Address peer = parse_ip(r.peer_ip);
  if (!trusted(peer, trusted_proxies)) return peer.ok ? format_ip(peer) : std::string(r.peer_ip);
  // Right to left: the last address a trusted proxy did not add is the client.
  std::vector<std::string_view> hops;
  for (std::string_view value : r.headers("x-forwarded-for")) {
    while (!value.empty()) {
      const auto comma = value.find(',');
      hops.push_back(trim(value.substr(0, comma)));
      value.remove_prefix(comma == std::string_view::npos ? value.size() : comma + 1);
    }
  }
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    const Address a = parse_ip(*it);
    if (!a.ok) break;  // garbage: stop trusting the chain here
    if (!trusted(a, trusted_proxies)) return format_ip(a);
    if (it + 1 == hops.rend()) return format_ip(a);  // all trusted: the first hop is the client
  }
  for (std::string_view real : r.headers("x-real-ip")) {
    if (const Address a = parse_ip(real); a.ok) return format_ip(a);
  }
  return format_ip(peer);
}

app::CheckRequest build_descriptors(const rules::DomainConfig& domain, const ProxiedRequest& r) {
  app::CheckRequest req;
  req.domain = domain.domain;
  std::string ip;
  for (const auto& entries : domain.forward_auth.descriptors) {
    app::CheckDescriptor d;
    bool complete = true;
    for (const rules::EntrySource& e : entries) {
      std::optional<std::string> value;
      switch (e.source) {
        case rules::Source::kClientIp:
          if (ip.empty()) ip = client_ip(r, domain.forward_auth.trusted_proxies);
          value = ip;
          break;
        case rules::Source::kHeader: {
          const auto values = r.headers(e.name);
          if (!values.empty()) value = std::string(values.front());
          break;
        }
        case rules::Source::kMethod: value = std::string(r.method); break;
        case rules::Source::kPath: value = std::string(path_of(r.uri)); break;
        case rules::Source::kPathPrefix: value = path_prefix(r.uri, e.segments); break;
        case rules::Source::kHost: value = std::string(r.host); break;
        case rules::Source::kQuery: value = query_param(r.uri, e.name); break;
        case rules::Source::kValue: value = e.name; break;
      }
      if (!value) {
        complete = false;
        break;
      }
      d.entries.emplace_back(e.key, std::move(*value));
    }
    if (complete) req.descriptors.push_back(std::move(d));
  }
  return req;
}

// The statuses with a limit, as the library's one formatter (src/headers/rate_limit_headers.h) takes them.
std::vector<std::pair<std::string, std::string>> rate_limit_headers(const app::CheckResponse& r) {
  std::vector<headers::LimitState> limits;
  for (const auto& st : r.statuses) {
    if (!st.has_limit) continue;
    limits.push_back({.name = st.name,
                      .quota = static_cast<double>(st.requests_per_unit),
                      .window = st.window,
                      .refused = st.code == app::Code::kOverLimit,
                      .remaining = static_cast<double>(st.limit_remaining),
                      .reset = st.duration_until_reset,
                      .never = st.code == app::Code::kOverLimit && st.retry_after == kNever});
  }
  return headers::format(limits);
}

AuthAnswer auth_answer(const app::CheckResponse& r, int deny_status) {
  AuthAnswer a;
  a.headers = rate_limit_headers(r);
  if (r.overall != app::Code::kOverLimit) return a;
  a.status = deny_status;
  a.content_type = "application/problem+json";
  nlohmann::json violated = nlohmann::json::array();
  for (const auto& st : r.statuses) {
    if (st.code == app::Code::kOverLimit) violated.push_back(st.name);
  }
  std::string wait = "1";  // the binding limit's Retry-After, so body and field agree
  for (const auto& [name, value] : a.headers) {
    if (name == "Retry-After") wait = value;
  }
  nlohmann::json body = {{"type", "https://iana.org/assignments/http-problem-types#quota-exceeded"},
                         {"title", "Too Many Requests"},
                         {"status", deny_status},
                         {"detail", wait == std::to_string(headers::kMaxSeconds)
                                        ? std::string("Rate limit exceeded; no wait lets this request through.")
                                        : "Rate limit exceeded; retry in " + wait + " s."},
                         {"violated-policies", std::move(violated)}};
  a.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return a;
}

}  // namespace rk::api
