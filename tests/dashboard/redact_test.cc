// What the dashboard shows of a key (dashboard/redact.h, tracker.h's display_key): counter keys decoded for reading,
// and the values of entries named like credentials shown as fingerprints only.
#include "dashboard/redact.h"

#include <gtest/gtest.h>

#include "dashboard/tracker.h"

namespace rk::dashboard {
namespace {

TEST(DisplayKey, DecodesCounterKeysAndLeavesOthersAlone) {
  EXPECT_EQ(display_key("11:203.0.113.7"), "203.0.113.7");
  EXPECT_EQ(display_key("3:abc2:de"), "abc/de");
  EXPECT_EQ(display_key("0:"), "");
  EXPECT_EQ(display_key("9:short"), "9:short");
  EXPECT_EQ(display_key("plain"), "plain");
}

TEST(DisplayKey, SecretEntriesAreShownAsFingerprintsOnly) {
  // sha256("sk_live_SECRET") starts 95697d8551e8 (sha256sum agrees).
  EXPECT_EQ(fingerprint("sk_live_SECRET"), "sha256:95697d8551e8");
  EXPECT_EQ(display_key("14:sk_live_SECRET6:/login", {true, false}), "sha256:95697d8551e8//login");
  EXPECT_EQ(display_key("6:/login14:sk_live_SECRET", {false, true}), "/login/sha256:95697d8551e8");
  EXPECT_EQ(display_key("sk_live_SECRET", {true}), "sha256:95697d8551e8");  // not a counter key: all of it
}

TEST(SecretName, CredentialNamesButNotEnvoysGenericKey) {
  for (const char* n : {"api_key", "X-API-Key", "Authorization", "Proxy-Authorization", "Cookie", "x-auth-token",
                        "session_id", "client_secret", "password", "jwt"}) {
    EXPECT_TRUE(secret_name(n)) << n;
  }
  for (const char* n : {"remote_address", "path", "method", "user", "tenant", "generic_key", "header_match"}) {
    EXPECT_FALSE(secret_name(n)) << n;
  }
}

}  // namespace
}  // namespace rk::dashboard
