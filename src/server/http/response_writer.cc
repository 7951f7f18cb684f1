#include "server/http/response_writer.h"

#include <array>
#include <boost/beast/http/status.hpp>
#include <charconv>

#include "base/json_string.h"
#include "server/http/ascii.h"

namespace rk::server::http::detail {

namespace {

// RFC 9110 5.6.2's tchar as a table, and a field value's forbidden bytes (CR, LF, NUL) compared directly: these run
// over every header of every answer, and searching a set for each byte (string_view::find, find_first_of) was a
// tenth of a forward-auth request's user time.
constexpr auto kTchar = [] {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (const char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!kTchar[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

bool is_field_value(std::string_view s) {
  for (const char c : s) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

// Framing is the server's: a handler's own copy would contradict it.
bool is_framing(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") || iequals(name, "connection");
}

void append_number(std::string& out, std::size_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, static_cast<std::size_t>(end - digits));
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

using base::append_json_string;

// Response::field_lines: every line a token, ": ", a value and CRLF, and no framing field among them. Values are
// searched for CR, LF and NUL with memchr (string_view::find), not a byte at a time: they are most of the bytes.
std::string check_field_lines(std::string_view lines) {
  if (lines.find('\0') != std::string_view::npos) return "the handler's field lines have NUL in them";
  const std::size_t n = lines.size();
  std::size_t i = 0;
  while (i < n) {
    const std::size_t from = i;
    while (i < n && kTchar[static_cast<unsigned char>(lines[i])]) ++i;
    const std::string_view name = lines.substr(from, i - from);
    if (name.empty() || n - i < 2 || lines[i] != ':' || lines[i + 1] != ' ') {
      return "the handler's field line '" + std::string(lines.substr(from, 64)) + "' is not 'name: value'";
    }
    if (is_framing(name)) return "the handler's field lines set " + std::string(name);
    i += 2;
    const std::size_t lf = lines.find('\n', i);  // past i - 1, the space: lines[lf - 1] is the value's or CR
    if (lf == std::string_view::npos || lines[lf - 1] != '\r' ||
        lines.substr(i, lf - 1 - i).find('\r') != std::string_view::npos) {
      return "the handler's header " + std::string(name) + " has CR, LF or NUL in its value";
    }
    i = lf + 1;
  }
  return {};
}

}  // namespace

std::string check_response(const Response& res) {
  if (res.status < 200 || res.status > 599) return "the handler answered status " + std::to_string(res.status);
  if (!is_field_value(res.content_type)) return "the handler's Content-Type has CR, LF or NUL in it";
  for (const auto& [name, value] : res.headers) {
    if (!is_token(name)) return "the handler's header name '" + name.substr(0, 64) + "' is not a token";
    if (!is_field_value(value)) return "the handler's header " + name + " has CR, LF or NUL in its value";
  }
  return check_field_lines(res.field_lines);
}

bool asks_to_close(const Response& res) {
  for (const auto& [name, value] : res.headers) {
    if (!iequals(name, "connection")) continue;
    std::string_view rest = value;  // a list of tokens: "close", "close, x-foo"...
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string_view token = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
      if (iequals(token, "close")) return true;
    }
  }
  return false;
}

void append_response(std::string& out, const Response& res, const Framing& framing) {
  const auto status = static_cast<unsigned>(res.status);
  // RFC 9110 6.4.1: 204 and 304 never have a body; a Content-Length would describe some other response's.
  const bool bodiless = status == 204 || status == 304;
  const auto phrase = boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  std::string_view reason(phrase.data(), phrase.size());
  if (reason.starts_with('<')) reason = "Unknown";  // Beast's "<unknown-status>"
  out.append("HTTP/1.1 ");
  append_number(out, status);
  out.append(" ").append(reason).append("\r\n");
  if (!res.content_type.empty() && !bodiless) append_field(out, "Content-Type", res.content_type);
  for (const auto& [name, value] : res.headers) {
    if (!is_framing(name)) append_field(out, name, value);
  }
  out.append(res.field_lines);
  if (!bodiless) {
    out.append("Content-Length: ");
    append_number(out, res.body.size());
    out.append("\r\n");
  }
  if (!framing.keep_alive) {
    out.append("Connection: close\r\n");
  } else if (framing.http10) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
  if (!framing.head_only && !bodiless) out.append(res.body);
}

std::string error_json(int status, std::string_view reason, std::string_view message, std::string_view field) {
  std::string out = "{\"error\":{\"code\":";
  append_number(out, static_cast<std::size_t>(status));
  out.append(",\"reason\":");
  append_json_string(out, reason);
  if (!field.empty()) {
    out.append(",\"field\":");
    append_json_string(out, field);
  }
  out.append(",\"message\":");
  append_json_string(out, message);
  out.append("}}");
  return out;
}

void append_error(std::string& out, int status, std::string_view reason, std::string_view message) {
  const Response res{.status = status, .body = error_json(status, reason, message)};
  append_response(out, res, {.keep_alive = false});
}

}  // namespace rk::server::http::detail
