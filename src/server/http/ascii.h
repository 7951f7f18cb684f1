// server/http/ascii.h (internal): case-insensitive comparison of ASCII header names and tokens (base/ascii.h), and
// the optional whitespace around header values.
#pragma once

#include <string_view>

#include "base/ascii.h"

namespace rk::server::http::detail {

using base::iequals;

// `s` without the spaces and tabs at either end (RFC 9110's OWS).
constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace rk::server::http::detail
