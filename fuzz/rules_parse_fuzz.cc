// fuzz/rules_parse_fuzz.cc: a rules file (src/rules/parse.h) as the reloader takes it: parsed, and when it has no
// error, built into a RuleSet whose limiters are then asked once (a file the parser accepts must build: the
// reloader has no other check between the two).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ratekeeper/clock.h"
#include "rules/parse.h"
#include "rules/ruleset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  rk::rules::DomainConfig domain;
  const std::vector<rk::rules::ConfigError> errors = rk::rules::parse_domain("fuzz.yaml", text, domain);
  for (const rk::rules::ConfigError& e : errors) {
    if (e.message.empty() || e.to_string().empty()) __builtin_trap();
  }
  if (!errors.empty()) return 0;
  rk::rules::BuildOptions options;
  options.store.max_keys = 64;
  options.clock = std::make_shared<rk::ManualClock>(rk::Nanos{1'000'000'000});
  std::vector<rk::rules::DomainConfig> domains;
  domains.push_back(std::move(domain));
  const auto set = rk::rules::RuleSet::build(std::move(domains), nullptr, options, "fuzz");
  for (const auto& rule : set->rules()) {
    if (rule->limiter) (void)rule->limiter->check("k");
  }
  // Matching walks the compiled tree: the first descriptor of the file, by its own key and value.
  for (const rk::rules::DomainConfig& d : set->domains()) {
    if (d.descriptors.empty()) continue;
    const rk::rules::Descriptor& first = d.descriptors.front();
    const std::string value = first.value.value_or("v");
    const rk::rules::Entry entry{first.key, value};
    (void)set->match(d.domain, {&entry, 1});
  }
  return 0;
}
