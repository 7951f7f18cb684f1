// store/redis/url.cc: parsing the Redis URL and its addresses (url.h).
#include "store/redis/url.h"

#include <boost/asio/ip/address.hpp>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace rk::store::redis {

std::string endpoint_text(const Endpoint& e) {
  return (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

namespace {

// A DNS name as RFC 1123 allows (letters, digits, '-', and '.' between labels; '_' too, as some clouds use it).
bool is_host_name(std::string_view name) {
  if (name.empty() || name.size() > 253 || name.front() == '.' || name.front() == '-') return false;
  std::size_t label = 0;
  for (const char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

Endpoint parse_endpoint(std::string_view text, std::string_view where) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("'" + std::string(where) + "': " + why);
  };
  Endpoint e;
  std::string_view host = text, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) throw bad("unclosed '[' in '" + std::string(text) + "'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw bad("expected ':' after ']' in '" + std::string(text) + "'");
      port = text.substr(close + 2);
    }
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) throw bad("no host in '" + std::string(text) + "'");
  e.host = std::string(host);
  if (!port.empty()) {
    unsigned v = 0;
    const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc{} || p != port.data() + port.size() || v == 0 || v > 65535) {
      throw bad("port '" + std::string(port) + "' is not a number from 1 to 65535");
    }
    e.port = static_cast<std::uint16_t>(v);
  }
  boost::system::error_code ec;
  boost::asio::ip::make_address(e.host, ec);
  if (ec && !is_host_name(e.host)) throw bad("'" + e.host + "' is neither an IP address nor a host name");
  return e;
}

namespace {

using Mode = ClientOptions::Mode;

constexpr std::pair<std::string_view, Mode> kSchemes[] = {
    {"redis://", Mode::kSingle}, {"redis+cluster://", Mode::kCluster}, {"redis+sentinel://", Mode::kSentinel}};

// The scheme's mode and whether it is TLS (rediss...), and the URL after it.
Mode scheme(std::string_view url, std::string_view& rest, bool& tls) {
  tls = url.starts_with("rediss");
  const std::string_view after = url.substr(tls ? 6 : std::min<std::size_t>(5, url.size()));  // after "redis(s)"
  for (const auto& [prefix, mode] : kSchemes) {
    if (url.starts_with("redis") && after.starts_with(prefix.substr(5))) {
      rest = after.substr(prefix.size() - 5);
      return mode;
    }
  }
  throw std::invalid_argument("'" + std::string(url) +
                              "': the scheme must be redis://, redis+cluster:// or redis+sentinel:// (rediss for TLS)");
}

// "user:password@" or "password@" (as redis-cli takes it), taken off the front of `rest`.
void credentials(std::string_view& rest, ClientOptions& o) {
  const auto at = rest.rfind('@');
  if (at == std::string_view::npos) return;
  const std::string_view user = rest.substr(0, at);
  rest = rest.substr(at + 1);
  const auto colon = user.find(':');
  if (colon == std::string_view::npos) {
    o.password = std::string(user);
  } else {
    o.username = std::string(user.substr(0, colon));
    o.password = std::string(user.substr(colon + 1));
  }
}

// "h1:p1,h2:p2": a sentinel named without a port is on Sentinel's own, 26379.
void hosts(std::string_view list, std::string_view url, ClientOptions& o) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view one = list.substr(0, comma);
    o.endpoints.push_back(parse_endpoint(one, url));
    if (o.mode == Mode::kSentinel && o.endpoints.back().port == 6379 && one.find(':') == std::string_view::npos) {
      o.endpoints.back().port = 26379;
    }
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
}

}  // namespace

ClientOptions ClientOptions::parse_url(std::string_view url) {
  ClientOptions o;
  const auto bad = [&](const std::string& why) { return std::invalid_argument("'" + std::string(url) + "': " + why); };
  std::string_view rest;
  o.mode = scheme(url, rest, o.tls);
  credentials(rest, o);
  std::string_view list = rest, path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    list = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  hosts(list, url, o);
  if (o.endpoints.empty()) throw bad("no host");
  if (o.mode == Mode::kSingle && o.endpoints.size() > 1) throw bad("redis:// takes one host (use redis+cluster://)");
  if (o.mode == Mode::kSentinel) {
    if (path.empty()) throw bad("redis+sentinel:// needs the primary's name: redis+sentinel://host:port/name");
    o.primary_name = std::string(path);
  } else if (!path.empty()) {
    if (o.mode == Mode::kCluster) throw bad("a cluster has no database number");
    unsigned v = 0;
    const auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), v);
    if (ec != std::errc{} || p != path.data() + path.size() || v > 15) {
      throw bad("database '" + std::string(path) + "' is not a number from 0 to 15");
    }
    o.db = static_cast<int>(v);
  }
  return o;
}

std::string describe(const ClientOptions& o) {
  std::string s = o.tls ? "s" : "";
  for (const auto& [prefix, mode] : kSchemes) {
    if (mode == o.mode) s = std::string(prefix.substr(0, 5)) + s + std::string(prefix.substr(5));
  }
  for (std::size_t i = 0; i < o.endpoints.size(); ++i) s += (i ? "," : "") + endpoint_text(o.endpoints[i]);
  if (o.mode == Mode::kSentinel) s += "/" + o.primary_name;
  return s;
}

}  // namespace rk::store::redis
