#include "server/api/uri_path.h"

#include <vector>

#include "base/hex.h"

namespace rk::server::api {

namespace {

bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool unreserved(char c) { return alpha(c) || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~'; }

// "http://host:port/p" -> "/p"; "*" or "p" -> "/*", "/p". A proxy that forwards the request line's target as the
// client wrote it may hand us the absolute form.
std::string_view drop_authority(std::string_view p, std::string& scratch) {
  if (p.starts_with('/')) return p;
  const auto scheme_end = p.find("://");
  if (scheme_end != std::string_view::npos && scheme_end > 0) {
    bool scheme = true;
    for (char c : p.substr(0, scheme_end)) scheme = scheme && (alpha(c) || c == '+' || c == '-' || c == '.');
    if (scheme) {
      const auto slash = p.find('/', scheme_end + 3);
      return slash == std::string_view::npos ? std::string_view("/") : p.substr(slash);
    }
  }
  scratch = "/";
  scratch.append(p);
  return scratch;
}

// RFC 3986 6.2.2: escapes of unreserved characters decoded, the others' hex upper-cased, a stray '%' escaped (so
// that decoding twice finds nothing new: "%%341" is "%2541", never "%41" and then "A").
std::string decode_unreserved(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    const int hi = i + 2 < in.size() ? base::hex_value(in[i + 1]) : -1, lo = hi >= 0 ? base::hex_value(in[i + 2]) : -1;
    if (lo < 0) {
      out += "%25";
      continue;
    }
    const char c = static_cast<char>(hi * 16 + lo);
    if (unreserved(c)) {
      out += c;
    } else {
      out += '%';
      out += kHex[hi];
      out += kHex[lo];
    }
    i += 2;
  }
  return out;
}

void fold_case(std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      i += 2;  // an escape (always complete after decode_unreserved): its hex digits stay upper-case
    } else if (s[i] >= 'A' && s[i] <= 'Z') {
      s[i] = static_cast<char>(s[i] - 'A' + 'a');
    }
  }
}

}  // namespace

std::string normalize_path(std::string_view path, PathOptions options) {
  std::string scratch;
  const std::string decoded = decode_unreserved(drop_authority(path, scratch));
  const std::string_view s = decoded;
  // Segments after the leading '/'; empty ones (from "//") are dropped, "." and ".." resolved on a stack. The
  // result ends in '/' when its last input segment was empty, "." or "..", as RFC 3986's algorithm leaves it.
  std::vector<std::string_view> kept;
  bool trailing_slash = false;
  for (std::size_t i = 1; i <= s.size();) {
    const std::size_t end = std::min(s.find('/', i), s.size());
    std::string_view seg = s.substr(i, end - i);
    if (options.strip_params) seg = seg.substr(0, seg.find(';'));
    if (seg.empty() || seg == "." || seg == "..") {
      if (seg == ".." && !kept.empty()) kept.pop_back();
      trailing_slash = true;
    } else {
      kept.push_back(seg);
      trailing_slash = false;
    }
    i = end + 1;
  }
  std::string out;
  out.reserve(s.size());
  for (std::string_view seg : kept) {
    out += '/';
    out.append(seg);
  }
  if (out.empty() || trailing_slash) out += '/';
  if (options.fold_case) fold_case(out);
  return out;
}

}  // namespace rk::server::api
