// base/percent.h: application/x-www-form-urlencoded values decoded (a query string's, a login form's): '+' is a
// space and %XX the byte XX.
//
//   std::string v;
//   form_decode("a%20b+c", v)  -> true,  v == "a b c"
//   form_decode("100%", v)     -> false, v == "100%"    (a '%' without two hex digits after it stays as it is)
//
// The answer says whether every '%' began an escape, so that a caller may refuse a badly encoded value or take it
// as written.
#pragma once

#include <string>
#include <string_view>

namespace rk::base {

bool form_decode(std::string_view in, std::string& out);

}  // namespace rk::base
