// server/http/response_writer.h (internal): a Response as HTTP/1.1 bytes, appended to a connection's reusable
// output buffer, so pipelined answers go out in one write and a kept-alive connection does not allocate for them.
//
//   if (auto problem = check_response(res); !problem.empty()) { ...answer 500 instead... }
//   append_response(out, res, {.head_only = is_head, .keep_alive = keep, .http10 = version == 10});
#pragma once

#include <string>
#include <string_view>

#include "server/http/server.h"

namespace rk::server::http::detail {

struct Framing {
  bool head_only = false;  // a HEAD request: Content-Length of the body, but not the body
  bool keep_alive = true;  // false: `Connection: close`
  bool http10 = false;     // an HTTP/1.0 client kept alive is told so with `Connection: keep-alive`
};

// "" if res can be sent; otherwise what is wrong with it (a status outside 200-599, a header name that is not a
// token, CR, LF or NUL in a value).
std::string check_response(const Response& res);

// True if the handler asked, with its own `Connection: close` header, for the connection to close after this.
bool asks_to_close(const Response& res);

void append_response(std::string& out, const Response& res, const Framing& framing);

// Every error answer's body, the server's own and the API's alike (docs/service.md, "Bad input"): a status, a
// short reason (the label it is counted under), the field of the request at fault when one is, and what is wrong.
// {"error":{"code":400,"reason":"invalid_request","field":"descriptors[0].entries","message":"must not be empty"}}
std::string error_json(int status, std::string_view reason, std::string_view message, std::string_view field = {});

// A JSON error answer with `Connection: close`.
void append_error(std::string& out, int status, std::string_view reason, std::string_view message);

}  // namespace rk::server::http::detail

namespace rk::server::http {
using detail::error_json;  // for the handlers: one shape for every error answer
}  // namespace rk::server::http
