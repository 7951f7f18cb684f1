// server/api/public_routes.cc: the public listener's routes (routes.h): POST /v1/check, /v1/acquire, /v1/release,
// /v1/reserve and /v1/settle,
// envoyproxy/ratelimit's POST /json and GET /healthcheck, forward-auth at /v1/auth/<domain>, and the health probes.
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <variant>

#include "server/api/check_json.h"
#include "server/api/envoy_json.h"
#include "server/api/forward_auth.h"
#include "server/api/respond.h"
#include "server/api/routes.h"
#include "service/response_headers.h"

namespace rk::server::api {

namespace {

void check(service::Service& service, const Hooks& hooks, const server::http::Request& req,
           server::http::Response& res) {
  auto request = check_body(req, res, hooks, "http");
  if (!request) return;
  request->protocol = "http";
  const auto start = std::chrono::steady_clock::now();
  std::string domain = request->domain;
  decide(service, req, res, std::move(*request), true,
         [&hooks, start, domain = std::move(domain)](const service::CheckResult& result, server::http::Response& out) {
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

// POST /v1/acquire and /v1/release: a `concurrency` limit's lease. 200 acquired or released; 429 all slots held
// (Retry-After: until the first lease expires); 404 a release of an unknown, expired or released lease (nothing
// changed); 503 the store did not answer; 400 a bad request, naming the field.
void lease(service::Service& service, const Hooks& hooks, const server::http::Request& req, server::http::Response& res,
           bool release) {
  if (!method_is(req, res, hooks, "POST")) return;
  auto parsed = parse_lease_request(req.body, release);
  if (auto* e = std::get_if<service::RequestError>(&parsed)) {
    return error(res, hooks, "http", 400, "invalid_request", e->field, e->message);
  }
  answer_when_done<service::LeaseResult>(
      req, res,
      [&](auto done) {
        auto request = std::get<service::LeaseRequest>(std::move(parsed));
        if (release) {
          service.release_async(std::move(request), done);
        } else {
          service.acquire_async(std::move(request), done);
        }
      },
      [&hooks, release](const service::LeaseResult& result, server::http::Response& out) {
        if (auto* e = std::get_if<service::RequestError>(&result)) {
          return error(out, hooks, "http", 400, "invalid_request", e->field, e->message);
        }
        const auto& answer = std::get<service::LeaseAnswer>(result);
        if (!answer.store_error.empty()) {
          return error(out, hooks, "http", 503, "store_unavailable", "", answer.store_error);
        }
        if (release && !answer.done) {
          return error(out, hooks, "http", 404, "not_found", "lease",
                       "no such lease held (unknown, expired or released); nothing was changed");
        }
        out.status = answer.done ? 200 : 429;
        if (!answer.done) {
          const auto secs = std::chrono::ceil<std::chrono::seconds>(answer.retry_after).count();
          out.headers.emplace_back("Retry-After", std::to_string(std::max<std::int64_t>(secs, 1)));
        }
        out.body = lease_answer_json(answer, release);
      });
}

// POST /v1/reserve and /v1/settle: an estimate reserved on a rate limit, and settled at what was used. 200
// reserved or settled (an overdraw too: it is recorded, and "overdrew" says so); 429 a reserve refused
// (Retry-After); 404 a settle of an unknown, expired, settled or another key's reservation (nothing changed); 503
// the store did not answer (nothing is known); 400 a bad request, naming the field (and a domain shared in
// batches, which holds no reservations).
void reservation(service::Service& service, const Hooks& hooks, const server::http::Request& req,
                 server::http::Response& res, bool settle) {
  if (!method_is(req, res, hooks, "POST")) return;
  auto parsed = parse_reserve_request(req.body, settle);
  if (auto* e = std::get_if<service::RequestError>(&parsed)) {
    return error(res, hooks, "http", 400, "invalid_request", e->field, e->message);
  }
  const std::uint64_t actual = std::get<service::ReserveRequest>(parsed).amount;
  answer_when_done<service::ReserveResult>(
      req, res,
      [&](auto done) {
        auto request = std::get<service::ReserveRequest>(std::move(parsed));
        if (settle) {
          service.settle_async(std::move(request), done);
        } else {
          service.reserve_async(std::move(request), done);
        }
      },
      [&hooks, settle, actual](const service::ReserveResult& result, server::http::Response& out) {
        if (auto* e = std::get_if<service::RequestError>(&result)) {
          return error(out, hooks, "http", 400, "invalid_request", e->field, e->message);
        }
        const auto& answer = std::get<service::ReserveAnswer>(result);
        if (!answer.store_error.empty()) {
          return error(out, hooks, "http", 503, "store_unavailable", "", answer.store_error);
        }
        if (settle && !answer.done) {
          return error(out, hooks, "http", 404, "not_found", "reservation",
                       "no such reservation held (unknown, expired, settled or another key's); nothing was changed");
        }
        out.status = answer.done ? 200 : 429;
        if (!answer.done) {
          const Nanos wait = answer.decision.retry_after == kNever ? answer.ttl : answer.decision.retry_after;
          const auto secs = std::chrono::ceil<std::chrono::seconds>(wait).count();
          out.headers.emplace_back("Retry-After", std::to_string(std::max<std::int64_t>(secs, 1)));
        }
        out.body = reserve_answer_json(answer, settle, actual);
      });
}

// envoyproxy/ratelimit's POST /json (server/api/envoy_json.h). Like upstream's handler it takes any method: the
// body decides. Bad requests are counted as /v1/check's are.
void envoy_json(service::Service& service, const Hooks& hooks, const server::http::Request& req,
                server::http::Response& res) {
  auto parsed = parse_check_request(req.body);
  if (std::holds_alternative<service::RequestError>(parsed)) {
    if (hooks.bad_request) hooks.bad_request("http", "invalid_json");
    return envoy_bad_request(res);
  }
  const auto start = std::chrono::steady_clock::now();
  auto request = std::get<service::CheckRequest>(std::move(parsed));
  request.protocol = "http";
  std::string domain = request.domain;
  decide(service, req, res, std::move(request), true,
         [&hooks, start, domain = std::move(domain)](const service::CheckResult& result, server::http::Response& out) {
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
                  const server::http::Request& req, server::http::Response& res, std::string_view domain_name,
                  std::string_view uri) {
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
  request.protocol = "auth";
  request.rules = std::move(rules);  // domain points into it: nothing below may use domain
  decide(service, req, res, std::move(request), true,
         [&hooks, start, deny_status, name = std::move(name)](const service::CheckResult& result,
                                                              server::http::Response& out) {
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

}  // namespace

server::http::Handler public_routes(service::Service& service, Hooks hooks, ForwardAuthOptions forward) {
  return [&service, hooks, forward](const server::http::Request& req, server::http::Response& res) {
    if (req.path == "/v1/check") return check(service, hooks, req, res);
    if (req.path == "/v1/acquire") return lease(service, hooks, req, res, false);
    if (req.path == "/v1/release") return lease(service, hooks, req, res, true);
    if (req.path == "/v1/reserve") return reservation(service, hooks, req, res, false);
    if (req.path == "/v1/settle") return reservation(service, hooks, req, res, true);
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

}  // namespace rk::server::api
