// server/api/admin_routes.cc: the admin listener's routes (routes.h): its own-page checks (own_page.h) and token
// (admin_auth.h) first; then /metrics, /v1/rules, the peek and reset of /v1/admin/, the routes of the layers above
// (AdminOptions::routes: the dashboard's), and the health probes.
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>

#include "base/ascii.h"
#include "server/api/admin_auth.h"
#include "server/api/check_json.h"
#include "server/api/own_page.h"
#include "server/api/respond.h"
#include "server/api/routes.h"

namespace rk::server::api {

namespace {

using nlohmann::json;

void write_metrics(const Hooks& hooks, server::http::Response& res) {
  res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  res.body = hooks.metrics();
}

}  // namespace

server::http::Handler metrics_routes(Hooks hooks, std::string path) {
  return [hooks = std::move(hooks), path = std::move(path)](const server::http::Request& req,
                                                            server::http::Response& res) {
    if (req.path == path && hooks.metrics) return write_metrics(hooks, res);
    error(res, hooks, "prometheus", 404, "not_found", "", "no such endpoint: " + std::string(req.path.substr(0, 256)));
  };
}

server::http::Handler admin_routes(service::Service& service, Hooks hooks, AdminOptions admin) {
  for (std::string& h : admin.hosts) h = base::ascii_lower(h);
  return [&service, hooks, admin](const server::http::Request& req, server::http::Response& res) {
    if (!from_own_page(req, res, hooks, admin)) return;
    if (admin.auth && req.path != "/healthz" && req.path != "/readyz") {  // probes carry no token
      bool page = false;
      for (const AdminRoute& r : admin.routes) page = page || (r.page && r.page(req.path));
      const auto verdict = admin.auth->check(req, res, page);
      if (verdict != AdminAuth::kAdmitted) {
        if (hooks.bad_request && verdict != AdminAuth::kAnswered) {
          hooks.bad_request("admin", verdict == AdminAuth::kThrottled ? "throttled" : "unauthorized");
        }
        return;
      }
    }
    if (req.path == "/metrics" && hooks.metrics) return write_metrics(hooks, res);
    if (req.path == "/v1/rules") {
      res.body = rules_json(service.rules().get());
      return;
    }
    if (req.path == "/v1/admin/peek") {
      auto request = check_body(req, res, hooks, "admin");
      if (!request) return;
      return decide(service, req, res, std::move(*request), false,
                    [&hooks](const service::CheckResult& result, server::http::Response& out) {
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
    for (const AdminRoute& r : admin.routes) {
      if (r.handle(req, res)) return;
    }
    if (health(req, res, hooks)) return;
    error(res, hooks, "admin", 404, "not_found", "", "no such endpoint: " + std::string(req.path.substr(0, 256)));
  };
}

}  // namespace rk::server::api
