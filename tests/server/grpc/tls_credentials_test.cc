// gRPC over TLS (server/grpc/tls_credentials.h): handed only pairs read and checked as the HTTPS listeners' are.
// The attack: a rotation that writes the new key, waits longer than gRPC's refresh, then writes the certificate;
// new handshakes go on with the old pair throughout, and take the new one once it is whole. And the private
// directory gRPC reads: the owner's alone, one generation per pair, gone with the server.
#include "server/grpc/tls_credentials.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "server/grpc/rls_server.h"
#include "support/certs.h"

namespace rk::server::grpc {
namespace {

namespace fs = std::filesystem;
namespace hv = ::grpc::health::v1;
using namespace std::chrono_literals;
using rk::tests::Certs;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A health Check on a connection of its own (so a new handshake), trusting the CA certificates in `ca`.
bool answered(int port, const std::string& ca) {
  ::grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read(ca);
  ::grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = ::grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), ::grpc::SslCredentials(ssl), args);
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  hv::HealthCheckResponse response;
  return hv::Health::NewStub(channel)->Check(&ctx, hv::HealthCheckRequest(), &response).ok();
}

class GrpcTls : public ::testing::Test {
 protected:
  void SetUp() override {
    rules_ = fs::temp_directory_path() / ("rk-grpc-tls-" + std::to_string(::getpid()));
    fs::create_directories(rules_);
    std::ofstream(rules_ / "edge.yaml") << "domain: edge\ndescriptors:\n  - key: user\n"
                                           "    rate_limit: {unit: minute, requests_per_unit: 3}\n";
    reloader_ = std::make_unique<rules::Reloader>(rules_.string(), rules::BuildOptions{.clock = clock_});
    ASSERT_TRUE(reloader_->load_now().empty());
    service_ = std::make_unique<service::Service>(*reloader_, clock_);
    server_ = std::make_unique<GrpcServer>(
        *service_,
        GrpcOptions{.tls_cert = certs_("server.crt"), .tls_key = certs_("server.key"), .tls_refresh_seconds = 1});
    server_->start();
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(rules_);
  }

  Certs certs_;
  fs::path rules_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(Nanos{1'700'000'000'000'000'000});
  std::unique_ptr<rules::Reloader> reloader_;
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(GrpcTls, AKeyWrittenBeforeItsCertificateKeepsTheOldPairUntilTheCertificateComes) {
  ASSERT_TRUE(answered(server_->port(), certs_("ca.crt")));
  certs_.make_server_aside(2, "other-ca");
  fs::rename(certs_.aside() + "/server.key", certs_("server.key"));  // the key first
  EXPECT_THROW(server_->reload_tls(), server::tls::TlsFileError);
  // Longer than gRPC's refresh: had it been handed the files, it would serve the mismatched pair by now.
  for (const auto gap_end = std::chrono::steady_clock::now() + 2500ms; std::chrono::steady_clock::now() < gap_end;) {
    ASSERT_TRUE(answered(server_->port(), certs_("ca.crt")));
    ASSERT_FALSE(answered(server_->port(), certs_("other-ca.crt")));
    std::this_thread::sleep_for(100ms);
  }
  fs::rename(certs_.aside() + "/server.crt", certs_("server.crt"));  // then its certificate
  server_->reload_tls();
  bool taken = false;
  for (const auto until = std::chrono::steady_clock::now() + 15s; !taken && std::chrono::steady_clock::now() < until;) {
    taken = answered(server_->port(), certs_("other-ca.crt"));
    if (!taken) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(taken) << "the new pair was not served within 15 s of its reload (gRPC's refresh: 1 s)";
  EXPECT_FALSE(answered(server_->port(), certs_("ca.crt")));
}

TEST(GrpcTlsDirectory, OnlyTheOwnerReadsItEachPairIsAGenerationAndItGoesWithTheCredentials) {
  Certs certs;
  const server::tls::TlsFiles files{.cert = certs("server.crt"), .key = certs("server.key")};
  const auto first = server::tls::read_tls_files(files);
  std::string dir;
  {
    TlsCredentials credentials(first, 1);
    dir = credentials.directory();
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_EQ(fs::read_symlink(dir + "/current"), "1");
    ASSERT_EQ(::stat((dir + "/current/key.pem").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(read(dir + "/current/key.pem"), first->key);
    EXPECT_EQ(read(dir + "/current/cert.pem"), first->cert);
    EXPECT_FALSE(fs::exists(dir + "/current/ca.pem"));

    certs.rotate_server(2);
    const auto second = server::tls::read_tls_files(files);
    credentials.install(*second);
    credentials.install(*first);
    EXPECT_EQ(fs::read_symlink(dir + "/current"), "3");
    EXPECT_EQ(read(dir + "/current/cert.pem"), first->cert);
    EXPECT_EQ(read(dir + "/2/cert.pem"), second->cert);  // kept: a read under way may still open it
    EXPECT_FALSE(fs::exists(dir + "/1"));
    // Each generation's files carry a time none before had, within one second too: how gRPC sees a read straddle.
    struct stat two {
    }, three{};
    ASSERT_EQ(::stat((dir + "/2/key.pem").c_str(), &two), 0);
    ASSERT_EQ(::stat((dir + "/3/key.pem").c_str(), &three), 0);
    EXPECT_LT(two.st_mtime, three.st_mtime);

    server::tls::TlsPem with_ca = *first;  // client certificates are asked for from the start, or never
    with_ca.client_ca = read(certs("ca.crt"));
    EXPECT_THROW(credentials.install(with_ca), std::invalid_argument);
    EXPECT_EQ(fs::read_symlink(dir + "/current"), "3");
  }
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace rk::server::grpc
