// rules/xds/convert.cc: RateLimitConfig resources to rules files' text (rules/xds/convert.h).
#include "rules/xds/convert.h"

#include "base/json_string.h"
#include "envoy/service/discovery/v3/discovery.pb.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace rk::rules::xds {

namespace {

namespace rl = ::ratelimit::config::ratelimit::v3;

// A string as a double-quoted YAML scalar: JSON's escapes are YAML's, so no value can end the scalar or the line.
void put(std::string& out, const std::string& indent, const char* key, const std::string& value) {
  out += indent;
  out += key;
  out += ": ";
  base::append_json_string(out, value);
  out += '\n';
}

void put_raw(std::string& out, const std::string& indent, const char* key, const std::string& value) {
  out += indent + key + ": " + value + "\n";
}

// The unit as the schema spells it; a number it does not know as that number, which the reader refuses by name.
std::string unit_text(int unit) {
  if (rl::RateLimitUnit_IsValid(unit)) return rl::RateLimitUnit_Name(static_cast<rl::RateLimitUnit>(unit));
  return "\"" + std::to_string(unit) + "\"";
}

void policy(std::string& out, const std::string& indent, const rl::RateLimitPolicy& p) {
  out += indent + "rate_limit:\n";
  const std::string in = indent + "  ";
  if (!p.name().empty()) put(out, in, "name", p.name());
  // Unlimited takes nothing else: a unit or a limit given with it is refused by the reader, as from a file.
  if (p.unlimited()) put_raw(out, in, "unlimited", "true");
  if (p.unit() != rl::UNKNOWN) put_raw(out, in, "unit", unit_text(p.unit()));
  if (!p.unlimited() || p.requests_per_unit() != 0) {
    put_raw(out, in, "requests_per_unit", std::to_string(p.requests_per_unit()));
  }
  if (p.replaces_size() > 0) {
    out += in + "replaces:\n";
    for (const rl::RateLimitReplace& r : p.replaces()) put(out, in + "  - ", "name", r.name());
  }
}

void descriptors(std::string& out, const std::string& indent,
                 const google::protobuf::RepeatedPtrField<rl::RateLimitDescriptor>& list) {
  for (const rl::RateLimitDescriptor& d : list) {
    put(out, indent + "- ", "key", d.key());
    const std::string in = indent + "  ";
    if (!d.value().empty()) put(out, in, "value", d.value());
    if (d.has_rate_limit()) policy(out, in, d.rate_limit());
    if (d.shadow_mode()) put_raw(out, in, "shadow_mode", "true");
    if (d.quota_mode()) put_raw(out, in, "quota_mode", "true");
    if (d.detailed_metric()) put_raw(out, in, "detailed_metric", "true");
    if (d.descriptors_size() > 0) {
      out += in + "descriptors:\n";
      descriptors(out, in + "  ", d.descriptors());
    }
  }
}

}  // namespace

std::string config_to_yaml(const rl::RateLimitConfig& config) {
  std::string out;
  put(out, "", "domain", config.domain());
  out += "descriptors:\n";
  descriptors(out, "  ", config.descriptors());
  return out;
}

std::string response_to_files(const ::envoy::service::discovery::v3::DiscoveryResponse& response,
                              std::vector<RulesFile>& out) {
  if (response.type_url() != kRateLimitConfigType) {
    return "type_url '" + response.type_url() + "' is not " + kRateLimitConfigType + " (the only type subscribed to)";
  }
  for (int i = 0; i < response.resources_size(); ++i) {
    const google::protobuf::Any& any = response.resources(i);
    const std::string which = "resources[" + std::to_string(i) + "]";
    if (any.type_url() != kRateLimitConfigType) {
      return which + ": type_url '" + any.type_url() + "' is not " + kRateLimitConfigType;
    }
    rl::RateLimitConfig config;
    if (!any.UnpackTo(&config)) return which + ": not a RateLimitConfig (it does not decode)";
    const std::string name = config.name().empty() ? "#" + std::to_string(i) : config.name();
    out.push_back({"xds:" + name, config_to_yaml(config)});
  }
  return {};
}

}  // namespace rk::rules::xds
