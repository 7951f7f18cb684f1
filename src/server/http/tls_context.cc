// server/http/tls_context.cc: TLS files into an OpenSSL context (through Asio's wrapper), each failure naming its
// file and OpenSSL's reason.
#include "server/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace rk::http {

namespace detail {

namespace {

namespace ssl = boost::asio::ssl;
using Which = TlsFileError::Which;

// OpenSSL's reason for the last failure, its error queue emptied (it is per thread, and Asio reads it too).
std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return reason ? reason : "unknown OpenSSL error";
}

// OpenSSL's file errors do not say "no such file": open it first, for errno's words.
void readable(Which which, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TlsFileError(which, path, std::string("cannot read: ") + std::strerror(errno));
  std::fclose(f);
}

void load_certificate(SSL_CTX* ctx, const std::string& path) {
  readable(Which::kCert, path);
  if (SSL_CTX_use_certificate_chain_file(ctx, path.c_str()) != 1) {
    throw TlsFileError(Which::kCert, path, "not a PEM certificate chain (" + openssl_reason() + ")");
  }
}

void load_key(SSL_CTX* ctx, const std::string& path, const std::string& cert) {
  readable(Which::kKey, path);
  const bool loaded = SSL_CTX_use_PrivateKey_file(ctx, path.c_str(), SSL_FILETYPE_PEM) == 1;
  // Loading checks the key against the certificate already: its failure may be that rather than the file.
  const unsigned long e = ERR_peek_last_error();
  const bool mismatch = loaded ? SSL_CTX_check_private_key(ctx) != 1
                               : ERR_GET_LIB(e) == ERR_LIB_X509 && (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH ||
                                                                    ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH);
  if (mismatch) {
    ERR_clear_error();
    throw TlsFileError(Which::kKey, path, "does not match the certificate in " + cert);
  }
  if (!loaded) throw TlsFileError(Which::kKey, path, "not an unencrypted PEM private key (" + openssl_reason() + ")");
}

void require_client_certificates(SSL_CTX* ctx, const std::string& path) {
  readable(Which::kClientCa, path);
  if (SSL_CTX_load_verify_locations(ctx, path.c_str(), nullptr) != 1) {
    throw TlsFileError(Which::kClientCa, path, "not a PEM bundle of CA certificates (" + openssl_reason() + ")");
  }
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(path.c_str());  // what the server tells clients it accepts
  if (!names) {
    throw TlsFileError(Which::kClientCa, path, "holds no CA certificate (" + openssl_reason() + ")");
  }
  SSL_CTX_set_client_CA_list(ctx, names);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const TlsFiles& files) {
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
  load_certificate(ctx, files.cert);
  load_key(ctx, files.key, files.cert);
  if (!files.client_ca.empty()) require_client_certificates(ctx, files.client_ca);
  return context;
}

TlsContexts::TlsContexts(std::optional<TlsFiles> files) : files_(std::move(files)) {
  if (files_) current_ = make_tls_context(*files_);
}

std::shared_ptr<ssl::context> TlsContexts::current() const {
  if (!files_) return nullptr;
  std::lock_guard lock(mu_);
  return current_;
}

void TlsContexts::reload() { install(prepare()); }

std::shared_ptr<const PreparedTls> TlsContexts::prepare() const {
  if (!files_) return nullptr;
  return std::make_shared<const PreparedTls>(PreparedTls{make_tls_context(*files_)});  // throws: nothing changed
}

void TlsContexts::install(std::shared_ptr<const PreparedTls> prepared) {
  if (!files_ || !prepared) return;
  auto fresh = prepared->context;
  std::lock_guard lock(mu_);
  current_.swap(fresh);  // the old one is released after the lock, or with its last connection
}

}  // namespace detail

void check_tls_files(const TlsFiles& files) { detail::make_tls_context(files); }

}  // namespace rk::http
