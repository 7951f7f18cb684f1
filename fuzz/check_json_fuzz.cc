// fuzz/check_json_fuzz.cc: the body of POST /v1/check (src/server/api/check_json.h), exactly as a client sends
// it, and the error answer built from whatever the parser complains about (field names come from the input).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "server/api/check_json.h"
#include "server/http/response_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto parsed = rk::server::api::parse_check_request(body);
  if (const auto* error = std::get_if<rk::service::RequestError>(&parsed)) {
    if (error->message.empty()) __builtin_trap();  // every refusal says why
    const std::string answer = rk::server::http::error_json(400, "invalid_request", error->message, error->field);
    if (answer.empty() || answer.front() != '{') __builtin_trap();
    return 0;
  }
  const auto& request = std::get<rk::service::CheckRequest>(parsed);
  if (request.hits_addend > 0xFFFFFFFFull) __builtin_trap();  // the request's own is a uint32 in Envoy's API
  return 0;
}
