// rules/reader.h: the parts of reading one rules file, inside rk_rules. parse.cc turns a file's text into a
// DomainConfig through read_domain (read_domain.cc: the domain's settings and its tree of descriptors), which
// hands each rate_limit to read_rate_limit (read_rate_limit.cc: a limit's fields, its algorithm and parameters,
// the file's defaults) and forward_auth to read_forward_auth (read_forward_auth.cc). All share one RulesReader,
// so every problem lands in one list, in the order of the document.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rules/config.h"
#include "yaml/reader.h"

namespace rk::rules {

// yaml::Reader (which knows the file, for positions), plus what every part of a rules file needs: its `defaults:`.
class RulesReader : public yaml::Reader {
 public:
  using yaml::Reader::Reader;

  std::optional<std::uint32_t> uint32(const YAML::Node& n, const std::string& where) {
    const auto v = whole(n, where, 0, 0xFFFF'FFFF);
    if (!v) return std::nullopt;
    return static_cast<std::uint32_t>(*v);
  }

  std::optional<YAML::Node> defaults;  // the file's `defaults:` map, once read_defaults has checked it
};

void read_domain(RulesReader& r, const YAML::Node& root, DomainConfig& out);
// `defaults:`: a map of `algorithm` and parameters that the file's rate limits take where they give none.
void read_defaults(RulesReader& r, const YAML::Node& n);
void read_rate_limit(RulesReader& r, const YAML::Node& n, const std::string& where, RateLimit& out);
void read_forward_auth(RulesReader& r, const YAML::Node& n, ForwardAuth& out);

}  // namespace rk::rules
