// server/api/uri_path.h: a request path as the proxy in front would route it, so that a limit on /login cannot be
// stepped around by writing the same path differently (//login, /%6cogin, /./login, /x/../login, /login;a=b).
//
//   rk::server::api::normalize_path("/x/..//%6Cogin;jsessionid=1")   // "/login"
//
// In order: every '%' escape of an unreserved character (ALPHA, DIGIT, '-', '.', '_', '~') is decoded and every
// other escape's hex digits are upper-cased (RFC 3986 6.2.2.1-2), and a '%' not followed by two hex digits becomes
// "%25"; ';' parameters are cut from each segment (Tomcat and Spring route /login;x=1 as /login); runs of '/'
// become one (nginx's merge_slashes); "." and ".." segments are removed (RFC 3986 5.2.4, never above the root);
// optionally, ASCII letters are lower-cased outside escapes. The result starts with '/', and normalizing it again
// changes nothing (fuzz/forward_auth_fuzz.cc checks this).
//
// Input is the path alone (no query, no fragment); anything not starting with '/' (a URI in absolute form, '*')
// has its scheme and authority dropped, or gets a leading '/'.
#pragma once

#include <string>
#include <string_view>

namespace rk::server::api {

struct PathOptions {
  bool strip_params = true;  // cut ";..." from each segment (the safe choice: backends that honour them exist)
  bool fold_case = false;    // for case-insensitive backends; rules' values must then be written in lower case
};

std::string normalize_path(std::string_view path, PathOptions options = {});

}  // namespace rk::server::api
