// server/tls/tls_files.h: a listener's TLS files (certificate chain, private key, client CAs) read once and checked
// together, so that every listener serving them (HTTPS, the admin listener, gRPC) is handed the same bytes, and only
// bytes that make a working server: the one reload path of a rotation.
//
//   std::shared_ptr<const TlsPem> pem = read_tls_files(files);  // throws TlsFileError naming the file at fault
//   use_tls_pem(ssl_ctx, *pem, files);                           // an OpenSSL server context from those bytes
//
// A pair caught half-rotated (the key rewritten before its certificate, a file half written) is refused here; the
// caller keeps the pair it has and tries again at the files' next change.
//
// Thread safety: free functions over their arguments; a TlsPem is immutable once read.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX: this header needs no OpenSSL header

namespace rk::server::tls {

// TLS on a listener: PEM files.
struct TlsFiles {
  std::string cert;       // the server's certificate chain, leaf first
  std::string key;        // its private key (unencrypted)
  std::string client_ca;  // "": no client certificate asked for; else one is required, issued by these CAs
};

// A TLS file that cannot be used: `path` names it, `which` says which of TlsFiles it is, what() what is wrong
// ("tls.crt: not a PEM certificate chain (no start line)").
class TlsFileError : public std::runtime_error {
 public:
  enum class Which { kCert, kKey, kClientCa };
  TlsFileError(Which w, std::string file, const std::string& problem)
      : std::runtime_error(file + ": " + problem), which(w), path(std::move(file)) {}
  Which which;
  std::string path;
};

// The files' contents as read, checked to make a server together: the chain parses, the key is the leaf's, the
// client CAs (if any) parse and are at least one.
struct TlsPem {
  std::string cert, key, client_ca;  // client_ca empty: no client certificate asked for
};

// Files larger than this are refused rather than read (certificates and keys are a few KiB).
inline constexpr std::size_t kMaxTlsFileBytes = 1 << 20;

// Reads the files and checks them as a server would use them; throws TlsFileError naming the file at fault.
std::shared_ptr<const TlsPem> read_tls_files(const TlsFiles& files);

// Gives a server context `pem`'s certificate chain and key and, with client CAs, requires and verifies a client
// certificate issued by them. `files` names the files in errors. Throws TlsFileError (never for what
// read_tls_files accepted).
void use_tls_pem(ssl_ctx_st* ctx, const TlsPem& pem, const TlsFiles& files);

}  // namespace rk::server::tls
