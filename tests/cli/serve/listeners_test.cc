// serve's listener options from its flags (cli/serve/listeners.h), the admin token's part: a token too short to
// resist guessing, and a token sent in clear text to an admin listener off loopback, stop the start with a message
// naming what is wrong; the flag and its setting that allow the second. With TLS, through the real binary:
// tests/integration/tls_test.py.
#include "cli/serve/listeners.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rk::cli::serve {
namespace {

namespace fs = std::filesystem;

class AdminTokenOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rk-listeners-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string token_file(const std::string& text) {
    const std::string path = (dir_ / "admin.token").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }
  // listener_options()'s error for these flags; "" if it accepts them.
  std::string error_for(const ServeFlags& flags) {
    ListenerOptions options;
    std::string error;
    const bool ok = listener_options(flags, 1 << 20, options, error);
    EXPECT_EQ(ok, error.empty()) << error;
    EXPECT_EQ(ok && !flags.admin_token_file.empty(), options.admin_token != nullptr);
    return error;
  }

  fs::path dir_;
};

TEST_F(AdminTokenOptionsTest, ATokenShorterThanSixteenBytesStopsTheStartNamingTheFileAndTheMinimum) {
  ServeFlags flags;
  flags.admin_token_file = token_file("x\n");
  EXPECT_EQ(error_for(flags),
            "--admin-token-file: '" + flags.admin_token_file + "' is 1 byte long; it must be at least 16 bytes");
  token_file("0123456789abcde\r\n");  // 15 bytes once its line break is trimmed
  EXPECT_EQ(error_for(flags),
            "--admin-token-file: '" + flags.admin_token_file + "' is 15 bytes long; it must be at least 16 bytes");
  token_file("0123456789abcdef\n");
  EXPECT_EQ(error_for(flags), "");
}

TEST_F(AdminTokenOptionsTest, ATokenOffLoopbackWithoutTlsStopsTheStartUnlessAllowed) {
  ServeFlags flags;
  flags.admin_token_file = token_file("0123456789abcdef\n");
  for (const std::string admin : {"0.0.0.0:9090", "192.0.2.7:9090", "[::]:9090"}) {
    flags.admin = admin;
    EXPECT_EQ(error_for(flags), "--admin " + admin +
                                    ": not a loopback address, and without --tls-cert the admin "
                                    "token would cross the network in clear text: give --tls-cert and --tls-key, or "
                                    "--admin-allow-plaintext-token when something in between encrypts it "
                                    "(docs/service.md)");
  }
  flags.admin_allow_plaintext_token = true;
  EXPECT_EQ(error_for(flags), "");
  flags.admin_allow_plaintext_token = false;
  flags.admin = "127.0.0.2:9090";  // loopback: nothing crosses a network
  EXPECT_EQ(error_for(flags), "");
}

TEST_F(AdminTokenOptionsTest, TheAllowingSettingIsTheFlags) {
  const std::string settings = (dir_ / "settings.yaml").string();
  std::ofstream(settings) << "admin: 0.0.0.0:9090\nadmin-token-file: " << token_file("0123456789abcdef")
                          << "\nadmin-allow-plaintext-token: true\n";
  ServeFlags flags;
  bool help = false;
  EXPECT_TRUE(read_serve_flags({"--config", "rules.yaml", "--settings", settings}, flags, help).empty());
  EXPECT_TRUE(flags.admin_allow_plaintext_token);
  EXPECT_EQ(error_for(flags), "");
}

// The gRPC listener's own TLS (--grpc-tls-*), its connection age and --debug: each flag given without what it needs,
// or a file it cannot use, stops the start naming the flag. Their behaviour: tests/integration/upstream_env_test.py.
TEST_F(AdminTokenOptionsTest, GrpcTlsFlagsNeedGrpcTheirPairAndAClientCaForTheSan) {
  ServeFlags flags;
  flags.grpc_tls_cert = (dir_ / "none.crt").string();
  flags.grpc_tls_key = (dir_ / "none.key").string();
  EXPECT_EQ(error_for(flags),
            "--grpc-tls-cert, --grpc-tls-key, --grpc-tls-client-ca and --grpc-tls-client-san need "
            "--grpc");
  flags.grpc = "127.0.0.1:0";
  EXPECT_EQ(error_for(flags).rfind("--grpc-tls-cert " + flags.grpc_tls_cert + ": ", 0), 0u) << error_for(flags);
  flags.grpc_tls_key.clear();
  EXPECT_EQ(error_for(flags), "--grpc-tls-cert " + flags.grpc_tls_cert + ": needs --grpc-tls-key, its private key");
  flags.grpc_tls_cert.clear();
  flags.grpc_tls_client_ca = (dir_ / "ca.crt").string();
  EXPECT_EQ(error_for(flags), "--grpc-tls-client-ca " + flags.grpc_tls_client_ca +
                                  ": needs --grpc-tls-cert and --grpc-tls-key (client certificates are asked for "
                                  "over TLS)");
  flags.grpc_tls_client_ca.clear();
  flags.grpc_tls_client_san = "envoy";
  EXPECT_EQ(error_for(flags),
            "--grpc-tls-client-san envoy: needs --grpc-tls-client-ca (a client certificate's "
            "names are checked once it is verified)");
}

TEST_F(AdminTokenOptionsTest, ConnectionAgeNeedsGrpcAndDebugAnAddress) {
  ServeFlags flags;
  flags.grpc_max_connection_age = std::chrono::seconds(30);
  EXPECT_EQ(error_for(flags), "--grpc-max-connection-age and --grpc-max-connection-age-grace need --grpc");
  flags.grpc = "127.0.0.1:0";
  EXPECT_EQ(error_for(flags), "");
  flags.debug = "6070";
  EXPECT_EQ(error_for(flags), "--debug 6070: not ADDR:PORT (like 127.0.0.1:6070)");
  flags.debug = "127.0.0.1:6070";
  EXPECT_EQ(error_for(flags), "");
}

}  // namespace
}  // namespace rk::cli::serve
