// store/redis/sentinel.h: asking Redis Sentinels where the primary is (SENTINEL get-master-addr-by-name), without
// ever blocking: each sentinel in turn, each exchange (connect, question, answer) bounded as a whole by the connect
// timeout, so that a sentinel answering a byte at a time, or never, costs that and no more.
//
//   rk::store::redis::SentinelAsker asker(ioc, options, tls);   // options.endpoints: the sentinels; tls: transport.h
//   asker.ask([](std::optional<Endpoint> primary) { ... });  // on ioc's thread; nullopt: no sentinel named one
//
// Thread safety: none; used on its io_context's thread only. ask() and cancel() drop the question before (its
// callback is never called), and may be called from within a callback.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "store/redis/resp.h"
#include "store/redis/transport.h"
#include "store/redis/url.h"

namespace rk::store::redis {

class SentinelAsker {
 public:
  using Done = std::function<void(std::optional<Endpoint>)>;
  // `tls` null: plain TCP (redis+sentinel://); else the sentinels are asked over TLS too (rediss+sentinel://), and
  // each failed handshake adds one to `tls_failures`.
  SentinelAsker(boost::asio::io_context& ioc, const ClientOptions& options,
                std::shared_ptr<boost::asio::ssl::context> tls, std::atomic<std::uint64_t>& tls_failures);
  void ask(Done done);
  void cancel();
  // Why the last sentinel that could not be asked could not be ("TLS handshake with ... failed: ..."), or empty.
  const std::string& last_failure() const { return last_failure_; }

 private:
  void ask_turn(std::size_t turn);
  void next(std::size_t turn);
  void read(std::uint64_t gen, std::size_t turn);
  void answer(std::optional<Endpoint> primary);

  boost::asio::io_context& ioc_;
  const ClientOptions& options_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::atomic<std::uint64_t>& tls_failures_;
  std::string last_failure_;
  std::shared_ptr<Link> link_;       // to the sentinel being asked
  boost::asio::steady_timer timer_;  // its whole exchange's deadline
  std::uint64_t gen_ = 0;            // changes at every sentinel asked, so that handlers of an earlier one do nothing
  Parser parser_;
  Done done_;
};

}  // namespace rk::store::redis
