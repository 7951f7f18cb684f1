// dashboard/redact.h: which descriptor values are credentials, and how the admin listener shows them: never as they
// are (a hot key that is someone's API key would be readable by anyone who can read the dashboard), but as a short
// SHA-256 fingerprint an operator can compute from a key they hold (`printf %s KEY | sha256sum | cut -c1-12`).
//
//   rk::dashboard::fingerprint("sk_live_abc")     // "sha256:4c9a0f...": the first 12 hex digits
//   rk::dashboard::secret_name("x-api-key")       // true
//
// A value is a credential when its descriptor key is named like one (api_key, token, authorization, session, ...),
// or when the domain's forward_auth takes that key's value from a header named like one (Authorization, Cookie,
// X-API-Key, ...). Envoy's generic_key is not: Envoy fills it from its own configuration.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/config.h"
#include "rules/ruleset.h"

namespace rk::dashboard {

// Case-insensitive: a descriptor key or header name that names a credential.
bool secret_name(std::string_view name);

std::string fingerprint(std::string_view secret);

// For each entry of the rule's descriptor path, in order: whether its values are credentials.
std::vector<bool> secret_entries(const rules::DomainConfig& domain, const rules::Rule& rule);

}  // namespace rk::dashboard
