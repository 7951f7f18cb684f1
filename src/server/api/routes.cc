#include "server/api/routes.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <type_traits>

#include "base/ascii.h"
#include "core/registry.h"
#include "server/api/admin_auth.h"
#include "server/api/check_json.h"
#include "server/api/client_address.h"
#include "server/api/envoy_json.h"
#include "server/api/forward_auth.h"
#include "server/http/response_writer.h"
#include "service/response_headers.h"
#include "dashboard/dashboard.h"

namespace rk::api {

namespace {

using nlohmann::json;

void error(http::Response& res, const Hooks& hooks, std::string_view protocol, int status, std::string_view reason,
           std::string_view field, std::string_view message) {
  res.status = status;
  res.content_type = "application/json";
  res.body = http::error_json(status, reason, message, field);
  if (hooks.bad_request) hooks.bad_request(protocol, reason);
}

bool health(const http::Request& req, http::Response& res, const Hooks& hooks) {
  if (req.path == "/healthz") {
    res.body = R"({"status":"ok"})";
    return true;
  }
  if (req.path == "/readyz") {
    const bool ready = !hooks.ready || hooks.ready();
    res.status = ready ? 200 : 503;
    res.body = ready ? R"({"status":"ready"})" : R"({"status":"not ready"})";
    return true;
  }
  return false;
}

// Runs a check and answers through `answer(result, response)`: into the handler's Response when the service decides
// at once (in-process domains), otherwise through a deferred Reply when the remote store answers. The lock settles
// the race between the handler returning and the store answering on its own thread.
//
// One allocation: the handler and the service's callback share a Pending counted by hand, so that the callback
// holds one pointer (which std::function keeps without an allocation of its own) and no shared_ptr is copied. The
// service runs its callback exactly once (service.h), which drops the callback's count.
template <class Answer>
void decide(service::Service& service, const http::Request& req, http::Response& res, service::CheckRequest request,
            bool charge, Answer answer) {
  struct Pending {
    explicit Pending(Answer a) : answer(std::move(a)) {}
    void release() {
      if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
    std::atomic<int> refs{2};  // the handler's and the callback's
    std::mutex mu;
    bool deferred = false;  // under mu: the handler has returned; answer through `reply`
    std::optional<service::CheckResult> early;
    http::Reply reply;
    Answer answer;
  };
  auto* pending = new Pending(std::move(answer));
  const auto done = [pending](service::CheckResult result) {
    {
      std::unique_lock lock(pending->mu);
      if (!pending->deferred) {
        pending->early = std::move(result);
        lock.unlock();
        return pending->release();
      }
    }
    http::Response out;
    pending->answer(result, out);
    pending->reply.send(std::move(out));
    pending->release();
  };
  static_assert(std::is_trivially_copyable_v<decltype(done)> && sizeof(done) <= sizeof(void*));
  if (charge) {
    service.check_async(std::move(request), done);
  } else {
    service.dry_run_async(std::move(request), done);
  }
  struct Release {
    Pending* p;
    ~Release() { p->release(); }
  } release{pending};
  std::lock_guard lock(pending->mu);
  if (pending->early) return pending->answer(*pending->early, res);
  pending->reply = req.defer();
  pending->deferred = true;
}

// Parses the body as a check request; answers the error itself and returns nullopt if it is bad.
std::optional<service::CheckRequest> check_body(const http::Request& req, http::Response& res, const Hooks& hooks,
                                            std::string_view protocol) {
  if (req.method != "POST") {
    error(res, hooks, protocol, 405, "method", "", "use POST with a JSON body");
    res.headers.emplace_back("Allow", "POST");
    return std::nullopt;
  }
  auto parsed = parse_check_request(req.body);
  if (auto* e = std::get_if<service::RequestError>(&parsed)) {
    error(res, hooks, protocol, 400, "invalid_json", e->field, e->message);
    return std::nullopt;
  }
  return std::get<service::CheckRequest>(std::move(parsed));
}

void check(service::Service& service, const Hooks& hooks, const http::Request& req, http::Response& res) {
  auto request = check_body(req, res, hooks, "http");
  if (!request) return;
  const auto start = std::chrono::steady_clock::now();
  std::string domain = request->domain;
  decide(service, req, res, std::move(*request), true,
         [&hooks, start, domain = std::move(domain)](const service::CheckResult& result, http::Response& out) {
           if (auto* e = std::get_if<service::RequestError>(&result)) {
             return error(out, hooks, "http", 400, "invalid_request", e->field, e->message);
           }
           const auto& response = std::get<service::CheckResponse>(result);
           if (hooks.decided) hooks.decided("http", domain, response, std::chrono::steady_clock::now() - start);
           out.status = response.overall == service::Code::kOverLimit ? 429 : 200;
           out.body = check_response_json(response);
           ResponseFields fields(out);
           service::rate_limit_headers(response, fields);
         });
}

// envoyproxy/ratelimit's POST /json (server/api/envoy_json.h). Like upstream's handler it takes any method: the
// body decides. Bad requests are counted as /v1/check's are.
void envoy_json(service::Service& service, const Hooks& hooks, const http::Request& req, http::Response& res) {
  auto parsed = parse_check_request(req.body);
  if (std::holds_alternative<service::RequestError>(parsed)) {
    if (hooks.bad_request) hooks.bad_request("http", "invalid_json");
    return envoy_bad_request(res);
  }
  const auto start = std::chrono::steady_clock::now();
  auto request = std::get<service::CheckRequest>(std::move(parsed));
  std::string domain = request.domain;
  decide(service, req, res, std::move(request), true,
         [&hooks, start, domain = std::move(domain)](const service::CheckResult& result, http::Response& out) {
           if (std::holds_alternative<service::RequestError>(result)) {
             if (hooks.bad_request) hooks.bad_request("http", "invalid_request");
             return envoy_bad_request(out);
           }
           const auto& response = std::get<service::CheckResponse>(result);
           if (hooks.decided) hooks.decided("http", domain, response, std::chrono::steady_clock::now() - start);
           envoy_json_answer(response, out);
         });
}

void forward_auth(service::Service& service, const Hooks& hooks, const ForwardAuthOptions& options,
                  const http::Request& req, http::Response& res, std::string_view domain_name, std::string_view uri) {
  auto rules = service.rules();
  const rules::DomainConfig* domain = rules ? rules->domain(domain_name) : nullptr;
  if (!domain || !domain->forward_auth.enabled) {
    error(res, hooks, "auth", 404, "not_found", "domain",
          "no forward_auth rules for domain '" + std::string(domain_name.substr(0, 256)) + "'");
    return;
  }
  const ProxiedRequest proxied{
      .peer_ip = req.remote_ip,
      .method = req.method,
      .uri = uri,
      .host = req.header("host"),
      .fields = req.fields,
  };
  auto built = build_descriptors(*domain, proxied, options);
  if (auto* e = std::get_if<service::RequestError>(&built)) {
    // The proxy's headers do not say who the client is: refused (the proxy turns it into an error), never a guess.
    return error(res, hooks, "auth", 400, "invalid_proxy_headers", e->field, e->message);
  }
  service::CheckRequest request = std::get<service::CheckRequest>(std::move(built));
  if (request.descriptors.empty()) return;  // nothing in this request to limit on: 200
  const auto start = std::chrono::steady_clock::now();
  std::string name = request.domain;
  const int deny_status = domain->forward_auth.deny_status;
  request.domain_config = domain;
  request.rules = std::move(rules);  // domain points into it: nothing below may use domain
  decide(service, req, res, std::move(request), true,
         [&hooks, start, deny_status, name = std::move(name)](const service::CheckResult& result, http::Response& out) {
           if (auto* e = std::get_if<service::RequestError>(&result)) {
             // A header too long to be a key, say: refuse with the reason rather than let it through unlimited.
             return error(out, hooks, "auth", 400, "invalid_request", e->field, e->message);
           }
           const auto& response = std::get<service::CheckResponse>(result);
           if (hooks.decided) hooks.decided("auth", name, response, std::chrono::steady_clock::now() - start);
           ResponseFields fields(out);
           AuthAnswer answer = auth_answer(response, deny_status, fields);
           out.status = answer.status;
           out.body = std::move(answer.body);
           if (!answer.content_type.empty()) out.content_type = answer.content_type;  // else the server's default
         });
}

bool method_is(const http::Request& req, http::Response& res, const Hooks& hooks, std::string_view method) {
  if (req.method == method || (method == "GET" && req.method == "HEAD")) return true;
  error(res, hooks, "admin", 405, "method", "", "use " + std::string(method));
  res.headers.emplace_back("Allow", method == "GET" ? "GET, HEAD" : std::string(method));
  return false;
}

// The dashboard's page and JSON; false when the path is none of them.
bool dashboard(service::Service& service, const Hooks& hooks, const http::Request& req, http::Response& res) {
  if (!hooks.tracker) return false;
  if (const dashboard::Asset* a = dashboard::asset(req.path)) {
    if (!method_is(req, res, hooks, "GET")) return true;
    res.content_type = std::string(a->content_type);
    res.body = std::string(a->body);
    res.headers.emplace_back("Content-Security-Policy", std::string(dashboard::kContentSecurityPolicy));
    res.headers.emplace_back("X-Content-Type-Options", "nosniff");
    res.headers.emplace_back("Cache-Control", "no-cache");
    return true;
  }
  auto answer = [&](std::variant<std::string, dashboard::WhatIfError> r) {
    if (auto* e = std::get_if<dashboard::WhatIfError>(&r)) {
      return error(res, hooks, "admin", 400, "invalid_request", e->field, e->message);
    }
    res.body = std::get<std::string>(std::move(r));
    res.headers.emplace_back("Cache-Control", "no-store");
  };
  if (req.path == "/v1/admin/hot-keys") {
    if (method_is(req, res, hooks, "GET")) answer(dashboard::hot_keys_json(service, *hooks.tracker, req.query));
    return true;
  }
  if (req.path == "/v1/admin/rates") {
    if (method_is(req, res, hooks, "GET")) answer(dashboard::rates_json(service, *hooks.tracker));
    return true;
  }
  if (req.path == "/v1/admin/simulate") {
    if (method_is(req, res, hooks, "POST")) answer(dashboard::run_what_if(req.body));
    return true;
  }
  return false;
}

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

// Refuses what a browser sends on behalf of another site's page: a foreign Host (DNS rebinding reads hot keys and
// rules), a foreign Origin (a cross-site POST resets limits), and a POST body a form or a "simple" fetch can send
// without a CORS preflight (only application/json needs one).
bool from_own_page(const http::Request& req, http::Response& res, const Hooks& hooks, const AdminOptions& admin) {
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
  if (req.method == "POST" && !(req.path == kLoginPath && admin.token)) {  // the login form posts a form
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

}  // namespace

http::Handler public_routes(service::Service& service, Hooks hooks, ForwardAuthOptions forward) {
  return [&service, hooks, forward](const http::Request& req, http::Response& res) {
    if (req.path == "/v1/check") return check(service, hooks, req, res);
    if (req.path == "/json") return envoy_json(service, hooks, req, res);
    if (req.path == "/healthcheck") return envoy_healthcheck(!hooks.ready || hooks.ready(), res);
    constexpr std::string_view kAuth = "/v1/auth/";
    if (req.path.starts_with(kAuth) && req.path.size() > kAuth.size()) {
      std::string_view domain = req.path.substr(kAuth.size()), uri = req.target;
      if (forward.proxy == ProxyKind::kEnvoy) {
        // Envoy's ext_authz appends the proxied request's path (and query) to its path_prefix, /v1/auth/<domain>.
        const std::string_view rest = (req.target.starts_with(kAuth) ? req.target : req.path).substr(kAuth.size());
        const std::size_t end = std::min(rest.find_first_of("/?"), rest.size());
        domain = rest.substr(0, end);
        uri = rest.substr(end);
      }
      return forward_auth(service, hooks, forward, req, res, domain, uri);
    }
    if (health(req, res, hooks)) return;
    error(res, hooks, "http", 404, "not_found", "", "no such endpoint: " + std::string(req.path.substr(0, 256)));
  };
}

http::Handler admin_routes(service::Service& service, Hooks hooks, AdminOptions admin) {
  for (std::string& h : admin.hosts) h = base::ascii_lower(h);
  return [&service, hooks, admin](const http::Request& req, http::Response& res) {
    if (!from_own_page(req, res, hooks, admin)) return;
    if (admin.token && req.path != "/healthz" && req.path != "/readyz") {  // probes carry no token
      const std::shared_ptr<const std::string> token = admin.token->current();
      if (req.path == kLoginPath) return admin_login(req, res, *token, admin.secure_cookie);
      if (!admin_authorized(req, *token)) {
        if (hooks.bad_request) hooks.bad_request("admin", "unauthorized");
        return admin_unauthorized(req, res, hooks.tracker && dashboard::asset(req.path));
      }
    }
    if (req.path == "/metrics" && hooks.metrics) {
      res.content_type = "text/plain; version=0.0.4; charset=utf-8";
      res.body = hooks.metrics();
      return;
    }
    if (req.path == "/v1/rules") {
      res.body = rules_json(service.rules().get());
      return;
    }
    if (req.path == "/v1/admin/peek") {
      auto request = check_body(req, res, hooks, "admin");
      if (!request) return;
      return decide(service, req, res, std::move(*request), false,
                    [&hooks](const service::CheckResult& result, http::Response& out) {
                      if (auto* e = std::get_if<service::RequestError>(&result)) {
                        return error(out, hooks, "admin", 400, "invalid_request", e->field, e->message);
                      }
                      out.body = check_response_json(std::get<service::CheckResponse>(result));
                    });
    }
    if (req.path == "/v1/admin/reset") {
      auto request = check_body(req, res, hooks, "admin");
      if (!request) return;
      auto result = service.reset(*request);
      if (auto* e = std::get_if<service::RequestError>(&result)) {
        return error(res, hooks, "admin", 400, "invalid_request", e->field, e->message);
      }
      res.body = json{{"reset", std::get<std::vector<bool>>(result)}}.dump();
      return;
    }
    if (dashboard(service, hooks, req, res)) return;
    if (health(req, res, hooks)) return;
    error(res, hooks, "admin", 404, "not_found", "", "no such endpoint: " + std::string(req.path.substr(0, 256)));
  };
}

// A rule's algorithm and every parameter it runs with, the defaults it took included. A calendar-aligned window
// has no fixed length: it says its period ("month") instead of window_seconds.
static void limit_json(const rules::RateLimit& l, nlohmann::json& rule) {
  const LimitSpec spec = core::with_defaults(l.spec);
  rule["algorithm"] = algorithm_name(spec.algorithm);
  if (spec.align == Align::kCalendar) {
    rule["align"] = "calendar";
    const auto days = std::chrono::duration_cast<std::chrono::hours>(spec.window).count() / 24;
    rule["calendar_period"] = days == 7 ? "week" : days == 30 ? "month" : "year";  // the only three (params.h)
  } else {
    rule["window_seconds"] = to_seconds(spec.window);
  }
  if (spec.half_life) rule["half_life_seconds"] = to_seconds(*spec.half_life);
  if (spec.burst) rule["burst"] = *spec.burst;
  if (spec.capacity) rule["capacity"] = *spec.capacity;
  if (core::takes(spec.algorithm, core::Param::kCountRefused)) rule["count_refused"] = core::counts_refused(spec);
}

std::string rules_json(const rules::RuleSet* set) {
  if (!set) return R"({"version":null,"domains":[]})";
  json domains = json::array();
  for (const rules::DomainConfig& d : set->domains()) {
    json list = json::array();
    for (const auto& r : set->rules()) {
      if (r->domain != d.domain) continue;
      json rule = {{"path", r->path}, {"name", r->name}, {"shadow_mode", r->shadow_mode}};
      const rules::RateLimit& l = *r->limit;
      if (l.unlimited) {
        rule["unlimited"] = true;
      } else {
        rule["requests_per_unit"] = l.requests_per_unit;
        if (l.unit) rule["unit"] = rules::unit_name(*l.unit);
        if (l.blocked) {
          rule["blocked"] = true;  // refuses everything; no algorithm runs
        } else {
          limit_json(l, rule);
        }
        if (r->limiter) rule["keys"] = r->limiter->stats().keys;
      }
      list.push_back(std::move(rule));
    }
    domains.push_back({{"domain", d.domain},
                       {"file", d.file},
                       {"shadow_mode", d.shadow_mode},
                       {"all_or_nothing", d.all_or_nothing},
                       {"forward_auth", d.forward_auth.enabled},
                       {"rules", std::move(list)}});
  }
  const auto loaded = std::chrono::duration_cast<std::chrono::milliseconds>(set->loaded_at().time_since_epoch());
  return json{{"version", set->version()},
              {"loaded_at_unix_ms", loaded.count()},
              {"domains", std::move(domains)}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rk::api
