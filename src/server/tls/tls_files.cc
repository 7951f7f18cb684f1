// server/tls/tls_files.cc: TLS files read into memory and put into an OpenSSL server context from there, each
// failure naming its file and OpenSSL's reason.
#include "server/tls/tls_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace rk::server::tls {

namespace {

using Which = TlsFileError::Which;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio memory(const std::string& text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

// An encrypted key is refused, never asked a password for (OpenSSL's default would prompt on a terminal).
int no_password(char*, int, int, void*) { return 0; }

// OpenSSL's reason for the last failure, its error queue emptied (it is per thread, and Asio reads it too).
std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return reason ? reason : "unknown OpenSSL error";
}

std::string read_file(Which which, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TlsFileError(which, path, std::string("cannot read: ") + std::strerror(errno));
  std::string text;
  char buf[16384];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() <= kMaxTlsFileBytes) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) throw TlsFileError(which, path, std::string("cannot read: ") + std::strerror(err));
  if (text.size() > kMaxTlsFileBytes) throw TlsFileError(which, path, "larger than 1 MiB: not a PEM file");
  return text;
}

// As OpenSSL's SSL_CTX_use_certificate_chain_file, from memory: the leaf, then each CA certificate after it, to the
// end of the text; a block that does not parse (a file half written) refuses the whole chain.
void use_chain(SSL_CTX* ctx, const std::string& pem, const std::string& path) {
  Bio bio = memory(pem);
  X509* leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, no_password, nullptr);
  if (!leaf) throw TlsFileError(Which::kCert, path, "not a PEM certificate chain (" + openssl_reason() + ")");
  const int used = SSL_CTX_use_certificate(ctx, leaf);
  X509_free(leaf);
  if (used != 1) throw TlsFileError(Which::kCert, path, "not a usable certificate (" + openssl_reason() + ")");
  SSL_CTX_clear_chain_certs(ctx);
  while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, no_password, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
      X509_free(ca);
      throw TlsFileError(Which::kCert, path, "not a usable certificate chain (" + openssl_reason() + ")");
    }
  }
  const unsigned long e = ERR_peek_last_error();  // the end of the text, or a block that did not parse
  if (ERR_GET_LIB(e) != ERR_LIB_PEM || ERR_GET_REASON(e) != PEM_R_NO_START_LINE) {
    throw TlsFileError(Which::kCert, path, "not a PEM certificate chain (" + openssl_reason() + ")");
  }
  ERR_clear_error();
}

void use_key(SSL_CTX* ctx, const std::string& pem, const TlsFiles& files) {
  Bio bio = memory(pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr);
  if (!key) {
    throw TlsFileError(Which::kKey, files.key, "not an unencrypted PEM private key (" + openssl_reason() + ")");
  }
  const bool loaded = SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  // Using it checks the key against the certificate already: its failure may be that.
  const unsigned long e = ERR_peek_last_error();
  const bool mismatch = loaded ? SSL_CTX_check_private_key(ctx) != 1
                               : ERR_GET_LIB(e) == ERR_LIB_X509 && (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH ||
                                                                    ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH);
  if (mismatch) {
    ERR_clear_error();
    throw TlsFileError(Which::kKey, files.key, "does not match the certificate in " + files.cert);
  }
  if (!loaded) throw TlsFileError(Which::kKey, files.key, "not a usable private key (" + openssl_reason() + ")");
}

void require_client_certificates(SSL_CTX* ctx, const std::string& pem, const std::string& path) {
  Bio bio = memory(pem);
  STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio.get(), nullptr, no_password, nullptr);
  if (!infos) {
    throw TlsFileError(Which::kClientCa, path, "not a PEM bundle of CA certificates (" + openssl_reason() + ")");
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();  // what the server tells clients it accepts
  bool added = true;
  for (int i = 0; i < sk_X509_INFO_num(infos) && added; ++i) {
    X509* ca = sk_X509_INFO_value(infos, i)->x509;
    if (!ca) continue;  // a CRL or a key in the bundle: not a CA
    X509_NAME* name = X509_NAME_dup(X509_get_subject_name(ca));
    added = X509_STORE_add_cert(store, ca) == 1 && name && sk_X509_NAME_push(names, name) > 0;
    if (!added) X509_NAME_free(name);
  }
  sk_X509_INFO_pop_free(infos, X509_INFO_free);
  if (!added || sk_X509_NAME_num(names) == 0) {
    sk_X509_NAME_pop_free(names, X509_NAME_free);
    throw TlsFileError(Which::kClientCa, path,
                       added ? "holds no CA certificate" : "not a usable CA bundle (" + openssl_reason() + ")");
  }
  SSL_CTX_set_client_CA_list(ctx, names);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
}

}  // namespace

void use_tls_pem(SSL_CTX* ctx, const TlsPem& pem, const TlsFiles& files) {
  ERR_clear_error();  // what failed before on this thread must not read as this one's failure
  use_chain(ctx, pem.cert, files.cert);
  use_key(ctx, pem.key, files);
  if (!files.client_ca.empty()) require_client_certificates(ctx, pem.client_ca, files.client_ca);
}

std::shared_ptr<const TlsPem> read_tls_files(const TlsFiles& files) {
  auto pem = std::make_shared<TlsPem>();
  pem->cert = read_file(Which::kCert, files.cert);
  pem->key = read_file(Which::kKey, files.key);
  if (!files.client_ca.empty()) pem->client_ca = read_file(Which::kClientCa, files.client_ca);
  // Checked as a server would use them: a context of their own, thrown away.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> scratch(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!scratch) throw TlsFileError(Which::kCert, files.cert, "cannot be checked (" + openssl_reason() + ")");
  use_tls_pem(scratch.get(), *pem, files);
  return pem;
}

}  // namespace rk::server::tls
