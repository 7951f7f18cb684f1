// fuzz/http_request_fuzz.cc: the HTTP/1.1 request parser (src/server/http/request_parser.h) driven the way a
// session drives it: bytes arrive in pieces (the first input byte picks their size), requests follow one another
// on a kept-alive connection, with the server's default limits scaled down so that they are reached.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/request_parser.h"

namespace {

constexpr std::size_t kHeaderLimit = 2048;
constexpr std::size_t kBodyLimit = 4096;

// What a handler reads of a parsed request: every view must point into the request's own storage.
void use(const rk::server::http::detail::RequestData& data) {
  std::size_t total = data.method().size() + data.target().size() + data.body().size();
  for (const rk::server::http::Field& f : data.fields()) total += f.name.size() + f.value.size();
  rk::server::http::Request request;
  request.method = data.method();
  request.target = data.target();
  request.fields = data.fields();
  total += request.header("content-type").size() + request.headers("x-forwarded-for").size();
  if (data.version() != 10 && data.version() != 11) __builtin_trap();
  if (data.body().size() > kBodyLimit) __builtin_trap();
  if (data.method().empty() || total < data.method().size()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t step = 1 + data[0] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string buffer;  // what has arrived and is not yet consumed, as the session's flat buffer
  std::size_t fed = 0;
  rk::server::http::detail::RequestData request;
  for (int requests = 0; requests < 64; ++requests) {
    request.clear();
    rk::server::http::detail::RequestParser parser(request);
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    bool failed = false;
    while (!parser.is_done()) {
      boost::system::error_code ec;
      std::size_t used = 0;
      if (!buffer.empty()) used = parser.put(boost::asio::buffer(buffer.data(), buffer.size()), ec);
      buffer.erase(0, used);
      if (ec && ec != boost::beast::http::error::need_more) {
        failed = true;
        break;
      }
      if (parser.is_done()) break;
      if (used == 0 || ec == boost::beast::http::error::need_more) {
        if (fed == input.size()) {
          // The connection ends mid-request: the session closes it (a request's body never runs to the end of
          // the stream, so there is nothing for put_eof to finish).
          failed = true;
          break;
        }
        const std::string_view piece = input.substr(fed, step);
        buffer.append(piece);
        fed += piece.size();
      }
    }
    if (failed) return 0;  // the session answers 400 and closes
    use(request);
    // RFC 9112 2.2: empty lines before the next request line are skipped.
    while (!buffer.empty() && (buffer.front() == '\r' || buffer.front() == '\n')) buffer.erase(0, 1);
    if (buffer.empty() && fed == input.size()) return 0;
  }
  return 0;
}
