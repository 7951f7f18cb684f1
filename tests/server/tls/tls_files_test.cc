// A listener's TLS files read and checked as a pair (server/tls/tls_files.h), on certificates made fresh by
// tests/support/make_certs.sh. The HTTP server's use of them is tests/server/http/tls_context_test.cc's.
#include "server/tls/tls_files.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "support/certs.h"

namespace rk::server::tls {
namespace {

using rk::tests::Certs;

// The one read every listener takes: the bytes of the files, checked as a pair. A rotation caught half done, the key
// written before its certificate or a certificate cut short, is refused naming the files.
TEST(TlsFiles, OneReadOfAPairCaughtHalfRotatedIsRefused) {
  Certs certs;
  const TlsFiles files{.cert = certs("server.crt"), .key = certs("server.key"), .client_ca = certs("ca.crt")};
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const auto pem = read_tls_files(files);
  EXPECT_EQ(pem->cert, read(files.cert));
  EXPECT_EQ(pem->key, read(files.key));
  EXPECT_EQ(pem->client_ca, read(files.client_ca));

  const std::string old_cert = read(files.cert);
  certs.rotate_server(2);
  std::ofstream(files.cert, std::ios::binary | std::ios::trunc) << old_cert;  // the new key, the old certificate
  try {
    read_tls_files(files);
    ADD_FAILURE() << "a key and another certificate were taken";
  } catch (const TlsFileError& e) {
    EXPECT_EQ(std::string(e.what()), files.key + ": does not match the certificate in " + files.cert);
  }
  std::ofstream(files.cert, std::ios::binary | std::ios::trunc) << old_cert.substr(0, old_cert.size() / 2);
  try {
    read_tls_files(files);
    ADD_FAILURE() << "half a certificate was taken";
  } catch (const TlsFileError& e) {
    EXPECT_EQ(e.which, TlsFileError::Which::kCert);
    EXPECT_TRUE(std::string(e.what()).starts_with(files.cert + ": not a PEM certificate chain")) << e.what();
  }
  // A chain whose second certificate is cut short: the whole chain is refused, not its first half taken.
  std::ofstream(files.cert, std::ios::binary | std::ios::trunc)
      << old_cert << read(certs("ca.crt")).substr(0, read(certs("ca.crt")).size() / 2);
  EXPECT_THROW(read_tls_files(files), TlsFileError);
}

}  // namespace
}  // namespace rk::server::tls
