// server/grpc/tls_credentials.cc: checked pairs written into a private directory gRPC's file watcher reads, one
// generation at a time (tls_credentials.h says why each step is there).
#include "server/grpc/tls_credentials.h"

#include <fcntl.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace rk::server::grpc {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error("gRPC's TLS pair: cannot " + what + " " + path + ": " + std::strerror(err));
}

// A new directory only this user can enter: under $XDG_RUNTIME_DIR (a tmpfs of the user's own) when there is one,
// else under the temporary directory ($TMPDIR or /tmp).
std::string private_directory() {
  std::vector<std::string> bases;
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run && run[0] == '/') bases.emplace_back(run);
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  bases.push_back(ec ? "/tmp" : tmp.string());
  int err = 0;
  for (const std::string& base : bases) {
    std::string name = base + "/ratekeeper-grpc-tls-XXXXXX";
    if (::mkdtemp(name.data())) return name;  // mode 0700
    err = errno;
  }
  fail("make a private directory under", bases.back(), err);
}

// A new file (mode 0600) holding `text`, its modification time `stamp`.
void write_file(const std::string& path, const std::string& text, std::time_t stamp) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("create", path, errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail("write", path, err);
    }
    done += static_cast<std::size_t>(n);
  }
  const timespec times[2] = {{stamp, 0}, {stamp, 0}};
  if (::futimens(fd, times) != 0 || ::close(fd) != 0) fail("finish", path, errno);
}

// A client certificate, already verified against the client CAs, must also name `san` among its subject
// alternative names (envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN). Synchronous: names are compared whole.
class SanVerifier final : public ::grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit SanVerifier(std::string san) : san_(std::move(san)) {}
  bool Verify(::grpc::experimental::TlsCustomVerificationCheckRequest* request, std::function<void(::grpc::Status)>,
              ::grpc::Status* sync_status) override {
    for (const auto& names :
         {request->dns_names(), request->uri_names(), request->ip_names(), request->email_names()}) {
      for (const ::grpc::string_ref& name : names) {
        if (std::string_view(name.data(), name.size()) == san_) {
          *sync_status = ::grpc::Status::OK;
          return true;
        }
      }
    }
    *sync_status = ::grpc::Status(::grpc::StatusCode::UNAUTHENTICATED,
                                  "the client certificate does not carry the subject alternative name " + san_);
    return true;
  }
  void Cancel(::grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  const std::string san_;
};

}  // namespace

TlsCredentials::TlsCredentials(std::shared_ptr<const server::tls::TlsPem> pem, unsigned refresh_seconds,
                               std::string client_san)
    : dir_(private_directory()), client_ca_(!pem->client_ca.empty()) {
  if (!client_san.empty() && !client_ca_) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw std::invalid_argument("a client certificate's subject alternative name is checked only with client CAs");
  }
  try {
    std::lock_guard lock(mu_);
    write_generation(*pem);  // before the provider: it reads the files once as it is made
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw;
  }
  namespace gx = ::grpc::experimental;
  const std::string current = dir_ + "/current/";
  provider_ = std::make_shared<gx::FileWatcherCertificateProvider>(
      current + "key.pem", current + "cert.pem", client_ca_ ? current + "ca.pem" : "", std::max(1u, refresh_seconds));
  gx::TlsServerCredentialsOptions options(provider_);
  options.watch_identity_key_cert_pairs();
  if (client_ca_) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    if (!client_san.empty()) {
      options.set_certificate_verifier(
          ::grpc::experimental::ExternalCertificateVerifier::Create<SanVerifier>(std::move(client_san)));
    }
  }
  credentials_ = gx::TlsServerCredentials(options);
}

TlsCredentials::~TlsCredentials() {
  credentials_.reset();
  provider_.reset();  // its thread stops reading, unless the server still holds it (it must be gone by now)
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void TlsCredentials::install(const server::tls::TlsPem& pem) {
  if (pem.client_ca.empty() == client_ca_) {
    throw std::invalid_argument("gRPC's TLS pair: client CAs cannot be added or dropped while serving");
  }
  std::lock_guard lock(mu_);
  write_generation(pem);
}

void TlsCredentials::write_generation(const server::tls::TlsPem& pem) {
  const std::uint64_t next = generation_ + 1;
  const std::string dir = dir_ + "/" + std::to_string(next);
  std::error_code ec;
  fs::remove_all(dir, ec);  // what a failed attempt left
  if (::mkdir(dir.c_str(), 0700) != 0) fail("make", dir, errno);
  // A modification time no generation before had: gRPC tells a straddled read by its files' times, in seconds.
  const std::time_t stamp = std::max(std::time(nullptr), stamp_ + 1);
  write_file(dir + "/key.pem", pem.key, stamp);
  write_file(dir + "/cert.pem", pem.cert, stamp);
  if (client_ca_) write_file(dir + "/ca.pem", pem.client_ca, stamp);
  const std::string link = dir_ + "/current.new";
  ::unlink(link.c_str());
  if (::symlink(std::to_string(next).c_str(), link.c_str()) != 0) fail("link", link, errno);
  if (::rename(link.c_str(), (dir_ + "/current").c_str()) != 0) fail("rename", link, errno);
  generation_ = next;
  stamp_ = stamp;
  if (next > 2) fs::remove_all(dir_ + "/" + std::to_string(next - 2), ec);
}

}  // namespace rk::server::grpc
