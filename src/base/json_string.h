// base/json_string.h: a string as a JSON string literal (RFC 8259 section 7), for what writes JSON by hand: the
// log lines, the HTTP server's error bodies.
//
//   std::string out;
//   append_json_string(out, "say \"hi\"\n");   // out is "say \"hi\"\n" with the quotes and the backslashes
//
// '"' and '\\' are escaped, newline, carriage return and tab as \n \r \t, the other control characters (below
// 0x20) as \u00XX; every other byte, UTF-8 included, is written as it is.
#pragma once

#include <string>
#include <string_view>

namespace rk::base {

void append_json_string(std::string& out, std::string_view s);

}  // namespace rk::base
