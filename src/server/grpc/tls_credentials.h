// server/grpc/tls_credentials.h: gRPC's TLS, handed only pairs read and checked by server/tls/tls_files.h (the one
// reload path the HTTPS listeners take too), never the user's files themselves.
//
//   TlsCredentials tls(server::tls::read_tls_files(files), /*refresh_seconds=*/1);  // throws std::runtime_error
//   builder.AddListeningPort(address, tls.credentials(), &port);
//   tls.install(*server::tls::read_tls_files(files));  // a rotation: new handshakes get it within refresh_seconds
//
// gRPC 1.51 serves TLS from a certificate provider. Its file-watching one rereads a key file and a certificate file
// every refresh interval and does not check that they match: pointed at the user's files, it took a key written
// before its certificate, and every new handshake failed until the certificate came. Here it watches a private
// directory instead (mode 0700, under $XDG_RUNTIME_DIR or else the temporary directory; removed with this object)
// into which each checked pair is written whole, as a generation of its own, made current by renaming a symbolic
// link over `current` in one step. gRPC reads the key, then the certificate, looking at each one's modification
// time before and after and reading both again if either changed; every generation's files carry a modification
// time no earlier generation had, so a read that straddles a swap is seen and done again, never served. The
// generation before the current one is kept (a read under way may still open it); older ones are removed.
//
// Thread safety: install() from any thread, one at a time (a mutex); credentials() is fixed at construction.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

#include "server/tls/tls_files.h"

namespace grpc {
class ServerCredentials;
namespace experimental {
class FileWatcherCertificateProvider;
}  // namespace experimental
}  // namespace grpc

namespace rk::server::grpc {

class TlsCredentials {
 public:
  // Writes `pem` as the first generation; gRPC looks for a new one every refresh_seconds. With pem->client_ca, a
  // client certificate issued by those CAs is required. Throws std::runtime_error if the directory cannot be made
  // or written.
  TlsCredentials(std::shared_ptr<const server::tls::TlsPem> pem, unsigned refresh_seconds);
  ~TlsCredentials();  // after the server using credentials() is gone: removes the directory
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;

  std::shared_ptr<::grpc::ServerCredentials> credentials() const { return credentials_; }
  // A pair read and checked (server::tls::read_tls_files) becomes the current generation: handshakes from gRPC's next
  // refresh on get it. Throws std::runtime_error, the current generation kept, if it cannot be written.
  void install(const server::tls::TlsPem& pem);
  const std::string& directory() const { return dir_; }

 private:
  void write_generation(const server::tls::TlsPem& pem);  // under mu_

  const std::string dir_;
  const bool client_ca_;
  std::mutex mu_;
  std::uint64_t generation_ = 0;  // the current one's number, its directory's name; under mu_
  std::time_t stamp_ = 0;         // the modification time its files carry; under mu_
  std::shared_ptr<::grpc::experimental::FileWatcherCertificateProvider> provider_;
  std::shared_ptr<::grpc::ServerCredentials> credentials_;
};

}  // namespace rk::server::grpc
