// server/api/admin_session.cc: sessions signed with HMAC-SHA256 under a key made of the process's secret and the
// token (admin_session.h).
#include "server/api/admin_session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdint>
#include <stdexcept>

#include "base/hex.h"

namespace rk::server::api {

namespace {

constexpr std::size_t kIdBytes = 16;
constexpr std::size_t kSignatureHex = 64;  // SHA-256's 32 bytes

std::string hex(const unsigned char* bytes, std::size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) base::append_hex(out, bytes[i]);
  return out;
}

bool is_hex(std::string_view s) { return s.find_first_not_of(base::kHexDigits) == std::string_view::npos; }

void random_bytes(unsigned char* out, std::size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) throw std::runtime_error("no random bytes for admin sessions");
}

std::int64_t unix_seconds(Nanos now) { return std::chrono::duration_cast<std::chrono::seconds>(now).count(); }

}  // namespace

AdminSessions::AdminSessions(std::chrono::seconds lifetime) : lifetime_(lifetime) {
  random_bytes(secret_.data(), secret_.size());
}

std::string AdminSessions::sign(std::string_view signed_part, std::string_view token) const {
  unsigned char key[EVP_MAX_MD_SIZE], mac[EVP_MAX_MD_SIZE];
  unsigned int key_size = 0, mac_size = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(token.data()), token.size(), key, &key_size) == nullptr ||
      HMAC(EVP_sha256(), key, static_cast<int>(key_size), reinterpret_cast<const unsigned char*>(signed_part.data()),
           signed_part.size(), mac, &mac_size) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");  // the handler's 500; never a session signed otherwise
  }
  OPENSSL_cleanse(key, sizeof key);
  return hex(mac, mac_size);
}

std::string AdminSessions::issue(std::string_view token, Nanos now) const {
  unsigned char id[kIdBytes];
  random_bytes(id, sizeof id);
  const std::string signed_part = std::to_string(unix_seconds(now) + lifetime_.count()) + "." + hex(id, sizeof id);
  return signed_part + "." + sign(signed_part, token);
}

bool AdminSessions::valid(std::string_view value, std::string_view token, Nanos now) const {
  const auto first = value.find('.');
  const auto last = value.rfind('.');
  if (first == std::string_view::npos || last == first) return false;
  const std::string_view expiry = value.substr(0, first);
  const std::string_view id = value.substr(first + 1, last - first - 1);
  const std::string_view signature = value.substr(last + 1);
  std::int64_t expires = 0;
  const auto [end, ec] = std::from_chars(expiry.data(), expiry.data() + expiry.size(), expires);
  if (ec != std::errc{} || end != expiry.data() + expiry.size() || expiry.starts_with('-') ||
      id.size() != 2 * kIdBytes || !is_hex(id) || signature.size() != kSignatureHex) {
    return false;
  }
  if (expires <= unix_seconds(now)) return false;
  const std::string expected = sign(value.substr(0, last), token);
  return CRYPTO_memcmp(expected.data(), signature.data(), kSignatureHex) == 0;
}

}  // namespace rk::server::api
