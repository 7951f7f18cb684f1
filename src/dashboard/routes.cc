// dashboard/routes.cc: the dashboard's routes on the admin listener (routes.h).
#include "dashboard/routes.h"

#include <future>
#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "dashboard/dashboard.h"
#include "http_fields/rate_limit_headers.h"
#include "server/api/respond.h"

namespace rk::dashboard {

namespace {

using server::api::error;
using server::api::method_is;

// POST /v1/admin/simulate. The what-if runs on the runner's thread, never the listener's (whose /healthz and /metrics
// answer meanwhile), and is answered through a deferred reply; one asked for while another runs gets 503 and
// Retry-After. Outside a server (a caller of the handler itself, as tests are) the handler waits for the answer.
void simulate(WhatIfRunner& runner, const server::api::Hooks& hooks, const server::http::Request& req,
              server::http::Response& res) {
  server::api::Hooks counted;  // the answer is made on the runner's thread, maybe after the handler's hooks have gone
  counted.bad_request = hooks.bad_request;
  auto answer = [counted](WhatIfResult r, server::http::Response& out) {
    if (auto* e = std::get_if<WhatIfError>(&r)) {
      return error(out, counted, "admin", e->status, e->status == 503 ? "busy" : "invalid_request", e->field,
                   e->message);
    }
    out.body = std::get<std::string>(std::move(r));
    out.headers.emplace_back("Cache-Control", "no-store");
  };
  const auto busy = [&](server::http::Response& out) {
    answer(WhatIfError{"", "another what-if is running: try again shortly", 503}, out);
    out.headers.emplace_back(http_fields::kRetryAfter, std::to_string(runner.retry_after().count()));
  };
  server::http::Reply reply = req.defer();
  if (!reply) {
    auto result = std::make_shared<std::promise<WhatIfResult>>();  // the worker may still hold it
    if (!runner.submit(std::string(req.body), [result](WhatIfResult r) { result->set_value(std::move(r)); }))
      return busy(res);
    return answer(result->get_future().get(), res);
  }
  auto shared = std::make_shared<server::http::Reply>(std::move(reply));  // std::function copies what it holds
  if (!runner.submit(std::string(req.body), [shared, answer](WhatIfResult r) {
        server::http::Response out;
        answer(std::move(r), out);
        shared->send(std::move(out));
      })) {
    server::http::Response out;
    busy(out);
    shared->send(std::move(out));
  }
}

// The dashboard's page, JSON and what-if; false when the path is none of them.
bool answer_page(service::Service& service, const Tracker& tracker, const server::api::Hooks& hooks,
                 WhatIfRunner& what_ifs, const server::http::Request& req, server::http::Response& res) {
  if (const Asset* a = asset(req.path)) {
    if (!method_is(req, res, hooks, "GET")) return true;
    res.content_type = std::string(a->content_type);
    res.body = std::string(a->body);
    res.headers.emplace_back("Content-Security-Policy", std::string(kContentSecurityPolicy));
    res.headers.emplace_back("X-Content-Type-Options", "nosniff");
    res.headers.emplace_back("Cache-Control", "no-cache");
    return true;
  }
  auto answer = [&](std::variant<std::string, WhatIfError> r) {
    if (auto* e = std::get_if<WhatIfError>(&r)) {
      return error(res, hooks, "admin", 400, "invalid_request", e->field, e->message);
    }
    res.body = std::get<std::string>(std::move(r));
    res.headers.emplace_back("Cache-Control", "no-store");
  };
  if (req.path == "/v1/admin/hot-keys") {
    if (method_is(req, res, hooks, "GET")) answer(hot_keys_json(service, tracker, req.query));
    return true;
  }
  if (req.path == "/v1/admin/rates") {
    if (method_is(req, res, hooks, "GET")) answer(rates_json(service, tracker, req.query));
    return true;
  }
  if (req.path == "/v1/admin/simulate") {
    if (method_is(req, res, hooks, "POST")) simulate(what_ifs, hooks, req, res);
    return true;
  }
  return false;
}

}  // namespace

server::api::AdminRoute admin_routes(service::Service& service, std::shared_ptr<const Tracker> tracker,
                                     server::api::Hooks hooks, WhatIfLimits what_if) {
  // Shared by the handler's copies; the last to go stops a what-if in progress and joins its thread.
  auto what_ifs = std::make_shared<WhatIfRunner>(what_if);
  return {
      .handle = [&service, tracker = std::move(tracker), hooks = std::move(hooks), what_ifs](
                    const server::http::Request& req,
                    server::http::Response& res) { return answer_page(service, *tracker, hooks, *what_ifs, req, res); },
      .page = [](std::string_view path) { return asset(path) != nullptr; }};
}

}  // namespace rk::dashboard
