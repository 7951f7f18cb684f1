// server/api/check_json.h: the JSON decision API's wire format <-> the service's types.
//
// Request (POST /v1/check; also envoyproxy/ratelimit's proto3 JSON, camelCase names accepted):
//   {"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}],
//    "hits_addend": 1, "limit": {"requests_per_unit": 5, "unit": "MINUTE"}}], "hits_addend": 1}
// Response: {"overall_code": "OK" | "OVER_LIMIT", "statuses": [{"code", "current_limit": {"name",
//   "requests_per_unit", "unit"}, "limit_remaining", "duration_until_reset": "40s", "rule", "algorithm",
//   "retry_after_seconds", "reset_after_seconds", "estimate", "shadowed"}]}
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "service/service.h"

namespace rk::server::api {

// Parses a check request; a RequestError names the JSON path of what is wrong.
std::variant<service::CheckRequest, service::RequestError> parse_check_request(std::string_view body);

std::string check_response_json(const service::CheckResponse& response);


// A duration as proto3 JSON writes it: "40s", "1.500s", "0s".
std::string proto_duration(Nanos d);

// A unit as Envoy's proto enum names it: "SECOND" .. "YEAR".
std::string proto_unit_name(rules::Unit u);

}  // namespace rk::server::api
