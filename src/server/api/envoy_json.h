// server/api/envoy_json.h: envoyproxy/ratelimit's own HTTP surface, for the scripts and clients written against it
// (docs/compatibility.md): POST /json and GET /healthcheck, on the public listener beside /v1/check.
//
//   POST /json  {"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/a"}]}]}
//   200 {"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":10,"unit":"MINUTE"},
//        "limitRemaining":9,"durationUntilReset":"52s"}]}
//
// The request is read as /v1/check reads it (proto3 JSON; both spellings of a field's name). The answer is the gRPC
// answer as proto3 JSON writes it: lowerCamelCase names in field-number order, defaults left out, enums by name.
// Status codes and bodies are upstream's: 200, 429 over the limit, 500 for an UNKNOWN overall code; a body that is
// not a request, or a request the service refuses, is 400 with the text/plain body "Bad Request\n" (/v1/check names
// the field; this endpoint answers what upstream's clients expect).
#pragma once

#include <string>

#include "server/http/server.h"
#include "service/service.h"

namespace rk::server::api {

// The gRPC answer as upstream's protojson marshalling writes it.
std::string envoy_response_json(const service::CheckResponse& response);

// The whole answer of POST /json to a decided request: status, Content-Type and body.
void envoy_json_answer(const service::CheckResponse& response, server::http::Response& out);

// 400 "Bad Request\n" as text/plain, the body upstream's handler writes for every bad request.
void envoy_bad_request(server::http::Response& out);

// GET /healthcheck: 200 "OK" while ready (rules loaded, not draining), else 500 with no body.
void envoy_healthcheck(bool ready, server::http::Response& out);

}  // namespace rk::server::api
