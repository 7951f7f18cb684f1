// server/api/own_page.cc: the admin listener's Host, Origin and Content-Type checks (own_page.h).
#include "server/api/own_page.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "base/ascii.h"
#include "server/api/admin_auth.h"
#include "server/api/client_address.h"
#include "server/api/respond.h"

namespace rk::server::api {

namespace {

// The host of a Host header or an Origin's authority, lower-case, without port or brackets or a final dot.
std::string host_name(std::string_view authority) {
  if (authority.starts_with('[')) {
    authority = authority.substr(1, authority.find(']') - 1);
  } else {
    authority = authority.substr(0, authority.rfind(':') == authority.find(':') ? authority.find(':') : authority.npos);
  }
  if (authority.ends_with('.')) authority.remove_suffix(1);
  return base::ascii_lower(authority);
}

bool configured(std::string_view name, const AdminOptions& admin) {
  return std::find(admin.hosts.begin(), admin.hosts.end(), name) != admin.hosts.end();
}

// A DNS-rebinding page makes the browser send its own host name, never an IP literal or a localhost name (which
// resolve here whatever the attacker's DNS says).
bool own_host(std::string_view name, const AdminOptions& admin) {
  return parse_ip(name) || name == "localhost" || name.ends_with(".localhost") || configured(name, admin);
}

}  // namespace

// Refuses what a browser sends on behalf of another site's page: a foreign Host (DNS rebinding reads hot keys and
// rules), a foreign Origin (a cross-site POST resets limits), and a POST body a form or a "simple" fetch can send
// without a CORS preflight (only application/json needs one).
bool from_own_page(const server::http::Request& req, server::http::Response& res, const Hooks& hooks,
                   const AdminOptions& admin) {
  const std::string_view host = req.header("host");
  if (!host.empty() && !own_host(host_name(host), admin)) {
    error(res, hooks, "admin", 403, "foreign_host", "Host",
          "'" + std::string(host.substr(0, 256)) + "' is not a name of this admin listener (see --admin-hosts)");
    return false;
  }
  if (const std::string_view origin = req.header("origin"); !origin.empty()) {
    const auto scheme = origin.find("://");
    const std::string_view authority = scheme == std::string_view::npos ? "" : origin.substr(scheme + 3);
    const bool own = !authority.empty() && (base::iequals(authority, host) || configured(host_name(authority), admin));
    if (!own) {
      error(res, hooks, "admin", 403, "foreign_origin", "Origin",
            "'" + std::string(origin.substr(0, 256)) + "' is not this admin listener's own page");
      return false;
    }
  }
  if (req.method == "POST" && !(req.path == kLoginPath && admin.auth)) {  // the login form posts a form
    const std::string_view type = req.header("content-type");
    std::string_view media = type.substr(0, type.find(';'));
    while (media.ends_with(' ') || media.ends_with('\t')) media.remove_suffix(1);
    if (base::ascii_lower(media) != "application/json") {
      error(res, hooks, "admin", 415, "content_type", "Content-Type",
            "'" + std::string(type.substr(0, 128)) + "' is not application/json");
      return false;
    }
  }
  return true;
}

}  // namespace rk::server::api
