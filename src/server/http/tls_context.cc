// server/http/tls_context.cc: TLS files, read and checked by server/tls/tls_files.h, into an OpenSSL context
// (through Asio's wrapper).
#include "server/http/tls_context.h"

#include <openssl/ssl.h>

#include <utility>

namespace rk::server::http {

namespace detail {

namespace ssl = boost::asio::ssl;

std::shared_ptr<ssl::context> make_tls_context(const server::tls::TlsPem& pem, const TlsFiles& files) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Renegotiation lets a client make the server redo the costly half of a handshake at will; compression leaks
  // secrets (CRIME). Idle connections give their read and write buffers back (tens of KiB each, 10,000 of them).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  // Sessions resumed under client verification need a context id, else OpenSSL refuses them.
  static constexpr unsigned char kSessionContext[] = "ratekeeper";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, static_cast<unsigned>(sizeof kSessionContext - 1));
  server::tls::use_tls_pem(ctx, pem, files);
  return context;
}

TlsContexts::TlsContexts(std::optional<TlsFiles> files) : files_(std::move(files)) {
  if (files_) current_ = make_tls_context(*server::tls::read_tls_files(*files_), *files_);
}

std::shared_ptr<ssl::context> TlsContexts::current() const {
  if (!files_) return nullptr;
  std::lock_guard lock(mu_);
  return current_;
}

void TlsContexts::reload() { install(prepare()); }

std::shared_ptr<const PreparedTls> TlsContexts::prepare() const {
  if (!files_) return nullptr;
  return prepare(server::tls::read_tls_files(*files_));  // throws: nothing changed
}

std::shared_ptr<const PreparedTls> TlsContexts::prepare(std::shared_ptr<const server::tls::TlsPem> pem) const {
  if (!files_ || !pem) return nullptr;
  return std::make_shared<const PreparedTls>(PreparedTls{make_tls_context(*pem, *files_)});
}

void TlsContexts::install(std::shared_ptr<const PreparedTls> prepared) {
  if (!files_ || !prepared) return;
  auto fresh = prepared->context;
  std::lock_guard lock(mu_);
  current_.swap(fresh);  // the old one is released after the lock, or with its last connection
}

}  // namespace detail

void check_tls_files(const TlsFiles& files) { server::tls::read_tls_files(files); }

}  // namespace rk::server::http
