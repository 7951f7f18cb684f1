// server/api/admin_routes.cc: the admin listener's routes (routes.h): its own-page checks (own_page.h) and token
// (admin_auth.h) first; then /metrics, /v1/rules, the peek and reset of /v1/admin/, the dashboard's page, JSON and
// what-if, and the health probes.
#include <nlohmann/json.hpp>

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "base/ascii.h"
#include "dashboard/dashboard.h"
#include "headers/rate_limit_headers.h"
#include "server/api/admin_auth.h"
#include "server/api/check_json.h"
#include "server/api/own_page.h"
#include "server/api/respond.h"
#include "server/api/routes.h"

namespace rk::api {

namespace {

using nlohmann::json;

bool method_is(const http::Request& req, http::Response& res, const Hooks& hooks, std::string_view method) {
  if (req.method == method || (method == "GET" && req.method == "HEAD")) return true;
  error(res, hooks, "admin", 405, "method", "", "use " + std::string(method));
  res.headers.emplace_back("Allow", method == "GET" ? "GET, HEAD" : std::string(method));
  return false;
}

// POST /v1/admin/simulate. The what-if runs on the runner's thread, never the listener's (whose /healthz and /metrics
// answer meanwhile), and is answered through a deferred reply; one asked for while another runs gets 503 and
// Retry-After. Outside a server (a caller of the handler itself, as tests are) the handler waits for the answer.
void what_if(dashboard::WhatIfRunner& runner, const Hooks& hooks, const http::Request& req, http::Response& res) {
  Hooks counted;  // the answer is made on the runner's thread, maybe after the handler's hooks have gone
  counted.bad_request = hooks.bad_request;
  auto answer = [counted](dashboard::WhatIfResult r, http::Response& out) {
    if (auto* e = std::get_if<dashboard::WhatIfError>(&r)) {
      return error(out, counted, "admin", e->status, e->status == 503 ? "busy" : "invalid_request", e->field,
                   e->message);
    }
    out.body = std::get<std::string>(std::move(r));
    out.headers.emplace_back("Cache-Control", "no-store");
  };
  const auto busy = [&](http::Response& out) {
    answer(dashboard::WhatIfError{"", "another what-if is running: try again shortly", 503}, out);
    out.headers.emplace_back(headers::kRetryAfter, std::to_string(runner.retry_after().count()));
  };
  http::Reply reply = req.defer();
  if (!reply) {
    auto result = std::make_shared<std::promise<dashboard::WhatIfResult>>();  // the worker may still hold it
    if (!runner.submit(std::string(req.body), [result](dashboard::WhatIfResult r) { result->set_value(std::move(r)); }))
      return busy(res);
    return answer(result->get_future().get(), res);
  }
  auto shared = std::make_shared<http::Reply>(std::move(reply));  // std::function copies what it holds
  if (!runner.submit(std::string(req.body), [shared, answer](dashboard::WhatIfResult r) {
        http::Response out;
        answer(std::move(r), out);
        shared->send(std::move(out));
      })) {
    http::Response out;
    busy(out);
    shared->send(std::move(out));
  }
}

// The dashboard's page and JSON; false when the path is none of them.
bool dashboard(service::Service& service, const Hooks& hooks, dashboard::WhatIfRunner* what_ifs,
               const http::Request& req, http::Response& res) {
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
    if (method_is(req, res, hooks, "GET")) answer(dashboard::rates_json(service, *hooks.tracker, req.query));
    return true;
  }
  if (req.path == "/v1/admin/simulate") {
    if (method_is(req, res, hooks, "POST")) what_if(*what_ifs, hooks, req, res);
    return true;
  }
  return false;
}

}  // namespace

http::Handler admin_routes(service::Service& service, Hooks hooks, AdminOptions admin) {
  for (std::string& h : admin.hosts) h = base::ascii_lower(h);
  // Shared by the handler's copies; the last to go stops a what-if in progress and joins its thread.
  std::shared_ptr<dashboard::WhatIfRunner> what_ifs;
  if (hooks.tracker) what_ifs = std::make_shared<dashboard::WhatIfRunner>(admin.what_if);
  return [&service, hooks, admin, what_ifs](const http::Request& req, http::Response& res) {
    if (!from_own_page(req, res, hooks, admin)) return;
    if (admin.auth && req.path != "/healthz" && req.path != "/readyz") {  // probes carry no token
      const auto verdict = admin.auth->check(req, res, hooks.tracker && dashboard::asset(req.path));
      if (verdict != AdminAuth::kAdmitted) {
        if (hooks.bad_request && verdict != AdminAuth::kAnswered) {
          hooks.bad_request("admin", verdict == AdminAuth::kThrottled ? "throttled" : "unauthorized");
        }
        return;
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
    if (dashboard(service, hooks, what_ifs.get(), req, res)) return;
    if (health(req, res, hooks)) return;
    error(res, hooks, "admin", 404, "not_found", "", "no such endpoint: " + std::string(req.path.substr(0, 256)));
  };
}

}  // namespace rk::api
