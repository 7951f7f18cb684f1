// server/http/tls_context.h (internal): a listener's TLS settings (ServerOptions::tls) as Asio SSL contexts: the
// one new connections use, replaced when the certificate files are rotated.
//
//   TlsContexts tls(options.tls);              // reads and checks the files; throws TlsFileError
//   auto ctx = tls.current();                  // per new connection; null without TLS (plaintext)
//   tls.reload();                              // Server::reload_tls(): new connections get the new files
//   tls.install(tls.prepare());                // the same in two steps (one read for two listeners)
//   tls.install(tls.prepare(pem));             // from a read shared with gRPC (server/tls/tls_files.h)
//
// A connection holds the shared_ptr of the context it began with, so a reload never touches a connection in
// flight; the old context goes with its last connection.
//
// Thread safety: current() and reload() from any thread; the pointer is under a mutex, taken once per TLS
// connection (never per request, never without TLS).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <optional>

#include "server/http/server.h"

namespace rk::server::http {

struct PreparedTls {
  std::shared_ptr<boost::asio::ssl::context> context;
};

}  // namespace rk::server::http

namespace rk::server::http::detail {

// A server-side context from the files' contents (server::tls::read_tls_files): TLS 1.2 or later, no renegotiation;
// with client_ca, a client certificate is required and verified. Throws TlsFileError naming the file at fault.
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const server::tls::TlsPem& pem, const TlsFiles& files);

class TlsContexts {
 public:
  explicit TlsContexts(std::optional<TlsFiles> files);
  std::shared_ptr<boost::asio::ssl::context> current() const;
  void reload();  // install(prepare())
  // The files, read and checked (throws TlsFileError); null without TLS.
  std::shared_ptr<const PreparedTls> prepare() const;
  // The same from files read and checked already (server::tls::read_tls_files). Null without TLS.
  std::shared_ptr<const PreparedTls> prepare(std::shared_ptr<const server::tls::TlsPem> pem) const;
  void install(std::shared_ptr<const PreparedTls> prepared);  // for new connections from now on; nothing if null

 private:
  const std::optional<TlsFiles> files_;
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // under mu_
};

}  // namespace rk::server::http::detail
