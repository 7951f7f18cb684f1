// Server (server.h): its life, start to stop, over Server::Impl (server_impl.h).
//
// The pieces, one job each:
//   listen_socket.h      the listening socket, shared by the workers
//   connection_limits.h  max_connections, max_connections_per_ip and per_ip_exempt
//   worker.h             one thread: its event loop, accepting, the timeout sweep, its connections
//   session.h            one connection: requests in, answers out, timeouts, lingering close
//   reply_channel.h      answers given later (Reply), from any thread
//   request_parser.h     Beast's parser into a connection's reusable storage
//   response_writer.h    a Response as HTTP/1.1 bytes
//   tls_context.h        with TLS, the context new connections use, replaced by reload_tls()
#include "server/http/server.h"

#include <boost/asio/post.hpp>
#include <stdexcept>
#include <string>

#include "server/http/server_impl.h"

namespace rk::server::http {

namespace {
thread_local const Server::Impl* tls_server = nullptr;  // the server whose thread this is, if any
}  // namespace

Server::Impl::Impl(ServerOptions o, Handler h, ServerEvents e)
    : options(std::move(o)),
      handler(std::move(h)),
      events(std::move(e)),
      limits(detail::connection_limits(options)),
      tls(options.tls) {
  for (int i = 0; i < options.threads; ++i) workers.push_back(std::make_unique<detail::Worker>(*this));
  std::vector<detail::tcp::acceptor*> acceptors;
  for (auto& w : workers) acceptors.push_back(&*w->acceptor);
  listener.open(options.address, options.port, acceptors);
}

bool Server::Impl::on_own_thread() const { return tls_server == this; }

void Server::Impl::run(detail::Worker& worker) {
  tls_server = this;
  for (;;) {
    try {
      worker.ioc->run();
      break;
    } catch (...) {  // every handler guards itself; this is the last resort, and the loop goes on
    }
  }
  {
    std::lock_guard lock(done_mu);
    --running;
  }
  done_cv.notify_all();
}

void Server::Impl::request_stop() {
  if (stopping.exchange(true)) return;
  listener.refuse();
  for (auto& w : workers) {
    detail::Worker* worker = w.get();
    boost::asio::post(*worker->ioc, [worker] { worker->begin_stop(); });
  }
}

Server::Server(ServerOptions options, Handler handler, ServerEvents events) {
  if (options.threads < 1) {
    throw std::invalid_argument("ServerOptions::threads is " + std::to_string(options.threads) +
                                "; it must be at least 1");
  }
  if (!handler) throw std::invalid_argument("the Server's handler is empty");
  impl_ = std::make_unique<Impl>(std::move(options), std::move(handler), std::move(events));
}

Server::~Server() {
  stop();
  impl_->workers.clear();
}

void Server::start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.started || s.stopping.load()) return;
  s.started = true;
  for (auto& w : s.workers) {
    detail::Worker* worker = w.get();
    worker->accept();
    worker->arm_sweep();
    {
      std::lock_guard done(s.done_mu);
      ++s.running;
    }
    try {
      worker->thread = std::thread([&s, worker] { s.run(*worker); });
    } catch (...) {
      std::lock_guard done(s.done_mu);
      --s.running;
      throw;
    }
  }
}

std::uint16_t Server::port() const { return impl_->listener.port(); }

void Server::reload_tls() { impl_->tls.reload(); }

std::shared_ptr<const PreparedTls> Server::prepare_tls() const { return impl_->tls.prepare(); }

std::shared_ptr<const PreparedTls> Server::prepare_tls(std::shared_ptr<const server::tls::TlsPem> pem) const {
  return impl_->tls.prepare(std::move(pem));
}

void Server::install_tls(std::shared_ptr<const PreparedTls> prepared) { impl_->tls.install(std::move(prepared)); }

void Server::stop() {
  Impl& s = *impl_;
  if (s.on_own_thread()) {  // from a handler: begin the drain; joining is for another thread
    s.request_stop();
    return;
  }
  std::lock_guard lock(s.mu);
  s.request_stop();
  if (!s.started) {  // no thread will run the posted stop: close the listening socket here
    for (auto& w : s.workers) {
      detail::error_code ec;
      w->acceptor->close(ec);
    }
    return;
  }
  if (s.joined) return;
  {
    std::unique_lock done(s.done_mu);
    if (!s.done_cv.wait_for(done, s.options.drain_timeout, [&] { return s.running == 0; })) {
      for (auto& w : s.workers) w->ioc->stop();  // each loop ends once its current handler returns
    }
  }
  for (auto& w : s.workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  s.joined = true;
  s.workers.clear();  // closes the connections a timed-out drain left open
  s.listener.close();
}

}  // namespace rk::server::http
