// server/http/reply_channel.h (internal): the way back to a connection for an answer given later (Reply, in
// server.h).
//
// Each Session makes one channel when it starts; Request::defer() asks it for a Reply, numbered with the request
// it answers. Reply::send() (or a Reply dropped unsent) posts the answer to the session's event loop, where
// Session::on_reply takes it if the session still waits for that very request.
//
// Thread safety: deliver() from any thread; defer() and close() on the connection's thread. `mu_` guards `open_`,
// closed before the connection or its event loop goes, so that a late Reply never touches either.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>

#include "server/http/net.h"
#include "server/http/server.h"

namespace rk::server::http::detail {

class Session;

class ReplyChannel : public std::enable_shared_from_this<ReplyChannel> {
 public:
  ReplyChannel(asio::io_context::executor_type executor, std::weak_ptr<Session> session, Session* raw)
      : executor_(executor), session_(std::move(session)), raw_(raw) {}

  Reply defer();  // from the handler, on the connection's thread
  void deliver(std::uint64_t seq, Response response, bool dropped) noexcept;
  void close() noexcept {
    std::lock_guard lock(mu_);
    open_ = false;
  }

 private:
  asio::io_context::executor_type executor_;
  std::weak_ptr<Session> session_;
  Session* raw_;  // for defer(), which runs inside the session's own handler call
  std::mutex mu_;
  bool open_ = true;
};

}  // namespace rk::server::http::detail
