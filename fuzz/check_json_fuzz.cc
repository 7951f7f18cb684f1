// fuzz/check_json_fuzz.cc: the body of POST /v1/check (src/server/api/check_json.h), exactly as a client sends
// it, and the error answer built from whatever the parser complains about (field names come from the input); the
// same bytes as the body of /v1/reserve, /v1/settle, /v1/acquire and /v1/release, which share its descriptor.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "server/api/check_json.h"
#include "server/http/response_writer.h"

namespace {

// Every refusal says why, and its answer is a JSON object.
void check_refusal(const rk::service::RequestError& error) {
  if (error.message.empty()) __builtin_trap();
  const std::string answer = rk::server::http::error_json(400, "invalid_request", error.message, error.field);
  if (answer.empty() || answer.front() != '{') __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const bool second : {false, true}) {
    const auto reservation = rk::server::api::parse_reserve_request(body, second);
    if (const auto* error = std::get_if<rk::service::RequestError>(&reservation)) {
      check_refusal(*error);
    } else if (std::get<rk::service::ReserveRequest>(reservation).amount > rk::kMaxReservationAmount) {
      __builtin_trap();  // the parser holds the cap
    }
    const auto lease = rk::server::api::parse_lease_request(body, second);
    if (const auto* error = std::get_if<rk::service::RequestError>(&lease)) check_refusal(*error);
  }
  const auto parsed = rk::server::api::parse_check_request(body);
  if (const auto* error = std::get_if<rk::service::RequestError>(&parsed)) {
    check_refusal(*error);
    return 0;
  }
  const auto& request = std::get<rk::service::CheckRequest>(parsed);
  if (request.hits_addend > 0xFFFFFFFFull) __builtin_trap();  // the request's own is a uint32 in Envoy's API
  return 0;
}
