#include "server/api/envoy_json.h"

#include <nlohmann/json.hpp>

#include "server/api/check_json.h"

namespace rk::server::api {

namespace {

// Fields in the order protojson writes them: by field number (RateLimitResponse: overall_code 1, statuses 2;
// DescriptorStatus: code 1, current_limit 2, limit_remaining 3, duration_until_reset 4; RateLimit:
// requests_per_unit 1, unit 2, name 3).
using ordered = nlohmann::ordered_json;

// proto3 leaves an enum's zero value (UNKNOWN) out, like every other default.
void put_code(ordered& o, const char* name, service::Code c) {
  if (c != service::Code::kUnknown) o[name] = service::code_name(c);
}

ordered current_limit(const service::DescriptorStatus& st) {
  ordered limit = ordered::object();
  if (st.requests_per_unit != 0) limit["requestsPerUnit"] = st.requests_per_unit;
  if (st.unit) limit["unit"] = proto_unit_name(*st.unit);  // `window:` rules have none: UNKNOWN, left out
  // As on gRPC: the rule's own `name:` only, never its path or "override" (DescriptorStatus::name).
  if (st.rule && !st.rule->limit->name.empty()) limit["name"] = st.rule->limit->name;
  return limit;
}

}  // namespace

std::string envoy_response_json(const service::CheckResponse& r) {
  ordered out = ordered::object();
  put_code(out, "overallCode", r.overall);
  ordered statuses = ordered::array();
  for (const service::DescriptorStatus& st : r.statuses) {
    ordered s = ordered::object();
    put_code(s, "code", st.code);
    if (st.has_limit) s["currentLimit"] = current_limit(st);
    if (st.limit_remaining != 0) s["limitRemaining"] = st.limit_remaining;
    // A set message is written even when all its fields are zero: "0s".
    if (st.has_limit) s["durationUntilReset"] = proto_duration(st.duration_until_reset);
    statuses.push_back(std::move(s));
  }
  if (!statuses.empty()) out["statuses"] = std::move(statuses);
  return out.dump(-1, ' ', false, ordered::error_handler_t::replace);
}

void envoy_json_answer(const service::CheckResponse& response, server::http::Response& out) {
  out.status = response.overall == service::Code::kOverLimit ? 429
               : response.overall == service::Code::kUnknown ? 500
                                                             : 200;
  out.content_type = "application/json";
  out.body = envoy_response_json(response);
}

void envoy_bad_request(server::http::Response& out) {
  out.status = 400;
  out.content_type = "text/plain; charset=utf-8";
  out.headers.emplace_back("X-Content-Type-Options", "nosniff");
  out.body = "Bad Request\n";
}

void envoy_healthcheck(bool ready, server::http::Response& out) {
  out.status = ready ? 200 : 500;
  out.content_type = ready ? "text/plain; charset=utf-8" : "";
  out.body = ready ? "OK" : "";
}

}  // namespace rk::server::api
