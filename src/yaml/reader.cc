// yaml/reader.cc: the typed reading of YAML nodes that rules files and scenarios share (yaml/reader.h).
#include "yaml/reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace rk::yaml {

// yaml-cpp counts from 0, and its null mark (of a node made in code, not read) is -1, -1.
base::SourcePos position(const std::string& file, const YAML::Mark& m) {
  return {file, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0};
}

void read_document(std::string_view text, const std::string& file, std::vector<Problem>& problems,
                   const std::function<void(const YAML::Node& root)>& read) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    problems.push_back({position(file, e.mark), "not valid YAML: " + e.msg});
    return;
  }
  try {
    read(root);
  } catch (const YAML::Exception& e) {
    problems.push_back({position(file, e.mark), "unreadable: " + e.msg});
  }
}

bool Reader::check_map(const YAML::Node& n, const std::string& where, const std::vector<std::string_view>& allowed) {
  if (!n.IsMap()) {
    fail(n, where + ": expected a map");
    return false;
  }
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) {
      fail(it->first, where + ": keys must be plain names");
      continue;
    }
    const std::string& k = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(it->first, where + ": unknown key '" + k + "' (expected one of: " + list + ")");
    } else if (!seen.insert(k).second) {
      fail(it->first, where + ": '" + k + "' is given twice");
    }
  }
  return true;
}

std::optional<std::string> Reader::string(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) return n.Scalar();
  fail(n, where + ": expected a string");
  return std::nullopt;
}

std::optional<bool> Reader::boolean(const YAML::Node& n, const std::string& where) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  fail(n, where + ": expected true or false");
  return std::nullopt;
}

std::optional<std::uint64_t> Reader::whole(const YAML::Node& n, const std::string& where, std::uint64_t lo,
                                           std::uint64_t hi) {
  if (!n.IsScalar()) {
    fail(n, where + ": expected a whole number");
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc{} && p == s.data() + s.size() && v >= lo && v <= hi) return v;
  fail(n, where + ": '" + s + "' is not a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return std::nullopt;
}

std::optional<double> Reader::number(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) {
    fail(n, where + ": expected a number");
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc{} && p == s.data() + s.size() && std::isfinite(v)) return v;
  fail(n, where + ": '" + s + "' is not a number");
  return std::nullopt;
}

std::optional<Nanos> Reader::duration(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar()) {
    fail(n, where + ": expected a duration");
    return std::nullopt;
  }
  if (auto d = parse_duration(n.Scalar())) return d;
  fail(n, where + ": '" + n.Scalar() + "' is not a duration (like 10s, 250ms, 1.5m, 2h, 1d; never negative)");
  return std::nullopt;
}

}  // namespace rk::yaml
