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

// POST /v1/acquire {"domain": "llm", "entries": [{"key": "user", "value": "42"}]} and POST /v1/release (the same
// and "lease": "<id>"), the `concurrency` algorithm's leases (docs/service.md).
// Answers: {"acquired": true, "lease": "<32 hex digits>", "rule", "max_in_flight", "in_flight",
// "lease_ttl_seconds"} or {"acquired": false, ..., "retry_after_seconds"}; {"released": true|false, "rule", ...}.
std::variant<service::LeaseRequest, service::RequestError> parse_lease_request(std::string_view body, bool release);
std::string lease_answer_json(const service::LeaseAnswer& answer, bool release);

// POST /v1/reserve {"domain": "llm", "entries": [{"key": "user", "value": "42"}], "estimate": 500} (and optional
// "ttl_seconds", 0.001 to 86400, default 60) and POST /v1/settle (the same entries, "reservation": "<id>" and
// "actual": 120), reserve and settle (docs/service.md). estimate and actual: whole numbers from 0 to 2^53.
// Answers: {"reserved": true, "reservation": "<32 hex digits>", "rule", "limit", "remaining",
// "ttl_seconds"} or {"reserved": false, ..., "retry_after_seconds"}; {"settled": true, "rule", "reserved",
// "actual", "overdrew", "limit", "remaining", "retry_after_seconds"}.
std::variant<service::ReserveRequest, service::RequestError> parse_reserve_request(std::string_view body, bool settle);
std::string reserve_answer_json(const service::ReserveAnswer& answer, bool settle, std::uint64_t actual);

// A duration as proto3 JSON writes it: "40s", "1.500s", "0s".
std::string proto_duration(Nanos d);

// A unit as Envoy's proto enum names it: "SECOND" .. "YEAR".
std::string proto_unit_name(rules::Unit u);

}  // namespace rk::server::api
