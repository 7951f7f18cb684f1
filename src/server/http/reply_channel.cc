// ReplyChannel, and the public Reply and Request::defer() it serves.
#include "server/http/reply_channel.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "server/http/session.h"

namespace rk::server::http {

namespace detail {

Reply ReplyChannel::defer() { return Reply(shared_from_this(), raw_->begin_deferral()); }

void ReplyChannel::deliver(std::uint64_t seq, Response response, bool dropped) noexcept {
  try {
    std::lock_guard lock(mu_);
    if (!open_) return;
    asio::post(executor_, [session = session_, seq, dropped, r = std::move(response)]() mutable {
      if (auto s = session.lock()) s->on_reply(seq, std::move(r), dropped);
    });
  } catch (...) {  // out of memory: the connection's answer is lost; it closes with the server
  }
}

}  // namespace detail

Reply::Reply(Reply&& other) noexcept : channel_(std::move(other.channel_)), seq_(other.seq_) {}

Reply& Reply::operator=(Reply&& other) noexcept {
  if (this != &other) {
    if (channel_) channel_->deliver(seq_, Response{}, true);
    channel_ = std::move(other.channel_);
    seq_ = other.seq_;
  }
  return *this;
}

Reply::~Reply() {
  if (channel_) channel_->deliver(seq_, Response{}, true);
}

void Reply::send(Response response) {
  if (!channel_) return;
  const auto channel = std::move(channel_);
  channel->deliver(seq_, std::move(response), false);
}

Reply Request::defer() const {
  if (!channel) return {};
  return channel->defer();
}

}  // namespace rk::server::http
