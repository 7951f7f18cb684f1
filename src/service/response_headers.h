// service/response_headers.h: the rate-limit header fields of a decision (RateLimit, RateLimit-Policy,
// X-RateLimit-*, Retry-After), as every wire adapter sends them: forward-auth and the JSON API as HTTP headers, the
// gRPC API as Envoy's response_headers_to_add. The bytes come from the library's one formatter
// (http_fields/rate_limit_headers.h), which the nginx module uses too through the C API.
//
//   for (auto& [name, value] : service::rate_limit_headers(response)) res.headers.emplace_back(name, value);
//   service::rate_limit_headers(response, sink);  // into a http_fields::FieldSink: no allocation of its own
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "http_fields/rate_limit_headers.h"
#include "service/service.h"

namespace rk::service {

// The fields for the statuses of `response` that carry a limit; none when no status does.
std::vector<std::pair<std::string, std::string>> rate_limit_headers(const CheckResponse& response);
void rate_limit_headers(const CheckResponse& response, http_fields::FieldSink& out);

}  // namespace rk::service
