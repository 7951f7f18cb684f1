#include "dashboard/redact.h"

#include <openssl/evp.h>

#include <algorithm>

#include "base/ascii.h"
#include "base/hex.h"

namespace rk::dashboard {

namespace {

// The keys from the root to the descriptor holding `limit`, into `path`; false when it is not under `list`.
bool path_to(const std::vector<rules::Descriptor>& list, const rules::RateLimit* limit,
             std::vector<std::string_view>& path) {
  for (const rules::Descriptor& d : list) {
    path.push_back(d.key);
    if ((d.rate_limit && &*d.rate_limit == limit) || path_to(d.descriptors, limit, path)) return true;
    path.pop_back();
  }
  return false;
}

}  // namespace

bool secret_name(std::string_view name) {
  const std::string n = base::ascii_lower(name);
  if (n == "generic_key") return false;
  static constexpr std::string_view kWords[] = {"auth",       "token", "secret", "passw",  "cookie",   "session",
                                                "credential", "key",   "jwt",    "bearer", "signature"};
  return std::any_of(std::begin(kWords), std::end(kWords), [&](std::string_view w) { return n.find(w) != n.npos; });
}

std::string fingerprint(std::string_view secret) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(secret.data(), secret.size(), md, &size, EVP_sha256(), nullptr) != 1) return "sha256:?";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < 6 && i < size; ++i) base::append_hex(out, md[i]);
  return out;
}

std::vector<bool> secret_entries(const rules::DomainConfig& domain, const rules::Rule& rule) {
  std::vector<std::string_view> keys;
  path_to(domain.descriptors, rule.limit, keys);
  std::vector<bool> secret;
  for (std::string_view key : keys) {
    bool s = secret_name(key);
    for (const auto& entries : domain.forward_auth.descriptors) {
      for (const rules::EntrySource& e : entries) {
        s = s || (e.key == key && e.source == rules::Source::kHeader && secret_name(e.name));
      }
    }
    secret.push_back(s);
  }
  return secret;
}

}  // namespace rk::dashboard
