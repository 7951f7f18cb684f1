// store/redis/transport.cc: resolving, connecting and TLS (transport.h).
#include "store/redis/transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace rk::store::redis {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// Loads one file into the context, or throws naming its flag and the file: unreadable first (the usual mistake),
// then what OpenSSL found wrong in it.
template <class Load>
void load(const std::string& flag, const std::string& path, Load&& load_it) {
  if (std::ifstream probe(path); !probe) {
    throw std::invalid_argument(flag + ": '" + path + "' cannot be read: " + std::strerror(errno));
  }
  error_code ec;
  load_it(ec);
  if (ec) throw std::invalid_argument(flag + ": '" + path + "' cannot be used: " + ec.message());
}

// Why OpenSSL refused the server's certificate ("certificate has expired", "hostname mismatch"), or else what
// the handshake's error says ("wrong version number": not a TLS server).
std::string handshake_reason(SSL* ssl, const error_code& ec) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) return std::string("certificate refused: ") + X509_verify_cert_error_string(verify);
  return ec.message();
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const ClientOptions& o) {
  const TlsOptions& f = o.tls_files;
  if (!o.tls) {
    if (!f.any()) return nullptr;
    const std::string flag = !f.ca_file.empty()     ? "--redis-tls-ca"
                             : !f.cert_file.empty() ? "--redis-tls-cert"
                             : !f.key_file.empty()  ? "--redis-tls-key"
                                                    : "--redis-tls-server-name";
    throw std::invalid_argument(flag +
                                ": given with a plain redis URL; TLS needs rediss://, rediss+cluster:// or "
                                "rediss+sentinel://");
  }
  if (f.cert_file.empty() != f.key_file.empty()) {
    throw std::invalid_argument(f.cert_file.empty() ? "--redis-tls-key: '" + f.key_file + "' needs --redis-tls-cert"
                                                    : "--redis-tls-cert: '" + f.cert_file + "' needs --redis-tls-key");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  ctx->set_verify_mode(ssl::verify_peer);
  if (f.ca_file.empty()) {
    ctx->set_default_verify_paths();
  } else {
    load("--redis-tls-ca", f.ca_file, [&](error_code& ec) { ctx->load_verify_file(f.ca_file, ec); });
  }
  if (!f.cert_file.empty()) {
    load("--redis-tls-cert", f.cert_file, [&](error_code& ec) { ctx->use_certificate_chain_file(f.cert_file, ec); });
    load("--redis-tls-key", f.key_file,
         [&](error_code& ec) { ctx->use_private_key_file(f.key_file, ssl::context::pem, ec); });
  }
  return ctx;
}

struct Link::Impl {
  Impl(asio::io_context& ioc, std::shared_ptr<ssl::context> ctx, std::string name)
      : tls_ctx(std::move(ctx)), server_name(std::move(name)), resolver(ioc), plain(ioc) {
    if (tls_ctx) tls.emplace(ioc, *tls_ctx);
  }
  tcp::socket& socket() { return tls ? tls->next_layer() : plain; }

  std::shared_ptr<ssl::context> tls_ctx;  // outlives `tls`, which uses it
  std::string server_name;
  tcp::resolver resolver;
  tcp::socket plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  bool closed = false;
  std::string writing;
  std::array<char, 16384> buf{};
};

Link::Link(asio::io_context& ioc, std::shared_ptr<ssl::context> tls, std::string server_name)
    : impl_(std::make_unique<Impl>(ioc, std::move(tls), std::move(server_name))) {}

Link::~Link() = default;

void Link::open(const Endpoint& endpoint, Opened done) {
  const std::string where = endpoint_text(endpoint);
  auto fail = [self = shared_from_this(), where, done](const std::string& what, const error_code& ec) {
    if (!self->impl_->closed) done(LinkFailure{"cannot connect to Redis at " + where + ": " + what + ec.message()});
  };
  // Connected: for TLS, the handshake, the name checked being the one asked for or else the host's.
  auto connected = [self = shared_from_this(), where, endpoint, done, fail](const error_code& ec) {
    Impl& m = *self->impl_;
    if (m.closed) return;
    if (ec) return fail("", ec);
    error_code ignored;
    m.socket().set_option(tcp::no_delay(true), ignored);
    if (!m.tls) return done(std::nullopt);
    const std::string& name = m.server_name.empty() ? endpoint.host : m.server_name;
    SSL* ssl = m.tls->native_handle();
    error_code not_ip;
    asio::ip::make_address(name, not_ip);
    if (not_ip) {
      SSL_set_tlsext_host_name(ssl, name.c_str());  // SNI, for a server behind a TLS proxy
      SSL_set1_host(ssl, name.c_str());
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    }
    m.tls->async_handshake(ssl::stream_base::client, [self, where, done](const error_code& e) {
      Impl& mm = *self->impl_;
      if (mm.closed) return;
      if (!e) return done(std::nullopt);
      done(LinkFailure{
          "TLS handshake with Redis at " + where + " failed: " + handshake_reason(mm.tls->native_handle(), e), true});
    });
  };
  error_code not_ip;
  const auto address = asio::ip::make_address(endpoint.host, not_ip);
  if (!not_ip) return impl_->socket().async_connect(tcp::endpoint(address, endpoint.port), connected);
  impl_->resolver.async_resolve(
      endpoint.host, std::to_string(endpoint.port),
      [self = shared_from_this(), fail, connected](const error_code& ec, const tcp::resolver::results_type& found) {
        if (self->impl_->closed) return;
        if (ec) return fail("cannot resolve its name: ", ec);
        asio::async_connect(self->impl_->socket(), found,
                            [connected](const error_code& e, const tcp::endpoint&) { connected(e); });
      });
}

void Link::write(std::string bytes, std::function<void(error_code)> done) {
  impl_->writing = std::move(bytes);
  auto then = [self = shared_from_this(), done = std::move(done)](const error_code& ec, std::size_t) {
    if (!self->impl_->closed) done(ec);
  };
  if (impl_->tls) return asio::async_write(*impl_->tls, asio::buffer(impl_->writing), std::move(then));
  asio::async_write(impl_->plain, asio::buffer(impl_->writing), std::move(then));
}

void Link::read(std::function<void(error_code, std::string_view)> done) {
  auto then = [self = shared_from_this(), done = std::move(done)](const error_code& ec, std::size_t n) {
    if (!self->impl_->closed) done(ec, std::string_view(self->impl_->buf.data(), ec ? 0 : n));
  };
  if (impl_->tls) return impl_->tls->async_read_some(asio::buffer(impl_->buf), std::move(then));
  impl_->plain.async_read_some(asio::buffer(impl_->buf), std::move(then));
}

// No TLS close_notify: it would need a round trip, and Redis does not wait for one.
void Link::close() {
  impl_->closed = true;
  impl_->resolver.cancel();
  error_code ignored;
  impl_->socket().close(ignored);
}

}  // namespace rk::store::redis
