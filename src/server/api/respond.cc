// server/api/respond.cc: the answers every route shares (respond.h): the error shape, the health probes, a check
// request's body.
#include "server/api/respond.h"

#include <string>
#include <variant>

#include "server/api/check_json.h"
#include "server/http/response_writer.h"

namespace rk::server::api {

void error(server::http::Response& res, const Hooks& hooks, std::string_view protocol, int status,
           std::string_view reason, std::string_view field, std::string_view message) {
  res.status = status;
  res.content_type = "application/json";
  res.body = server::http::error_json(status, reason, message, field);
  if (hooks.bad_request) hooks.bad_request(protocol, reason);
}

bool method_is(const server::http::Request& req, server::http::Response& res, const Hooks& hooks,
               std::string_view method) {
  if (req.method == method || (method == "GET" && req.method == "HEAD")) return true;
  error(res, hooks, "admin", 405, "method", "", "use " + std::string(method));
  res.headers.emplace_back("Allow", method == "GET" ? "GET, HEAD" : std::string(method));
  return false;
}

bool health(const server::http::Request& req, server::http::Response& res, const Hooks& hooks) {
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

// Parses the body as a check request; answers the error itself and returns nullopt if it is bad.
std::optional<service::CheckRequest> check_body(const server::http::Request& req, server::http::Response& res,
                                                const Hooks& hooks, std::string_view protocol) {
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

tracing::Parent trace_parent(const server::http::Request& req) {
  return tracing::read_parent([&req](std::string_view name) -> std::optional<std::string_view> {
    std::optional<std::string_view> found;
    for (const server::http::Field& f : req.fields) {
      if (!server::http::is_field(f, name)) continue;
      if (found) return std::string_view();  // twice: which one is the caller's?
      found = f.value;
    }
    return found;
  });
}

}  // namespace rk::server::api
