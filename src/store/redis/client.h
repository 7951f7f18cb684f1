// store/redis/client.h: a small non-blocking Redis client on Boost.Asio, for ratekeeper's decisions: pipelined,
// with timeouts, reconnection with backoff, AUTH, TLS (rediss://), host names resolved at every connection, Redis
// Cluster routing and Sentinel discovery.
//
//   auto options = rk::store::redis::ClientOptions::parse_url("redis://127.0.0.1:6379");  // url.h; throws on a bad URL
//   rk::store::redis::Client client(options);
//   client.exec({"INCR", "k"}, "k", [](rk::store::redis::Result r) { ... });   // on the client's thread, exactly once
//   rk::store::redis::Script script(client, "return redis.call('INCR', KEYS[1])");  // lua_script.h
//
// Pipelining: the commands given while a connection is writing go out together in its next write; replies are
// matched in order. A command not answered within command_timeout of its exec() (connecting, asking the sentinels,
// the handshake, redirects and a script's EVAL after NOSCRIPT included) fails with kTimeout; if Redis owed it the
// next reply, so does everything else in flight on its connection, which is then closed (a late reply can never
// meet the wrong command). A peer that answers a byte at a time, or never, costs each command its timeout and no
// more: nothing waits for a peer on the client's thread. While a node cannot be reached, commands to it fail at
// once (kConnection) until its backoff has passed; then one reconnection is tried.
//
// Every connection opens with a handshake pipelined ahead of the commands waiting for it (no round trip of its
// own): AUTH, SELECT, ROLE (to a primary named by a sentinel), and the commands given to on_every_connection()
// (a script's SCRIPT LOAD and FUNCTION LOAD: lua_script.h).
//
// Cluster (redis+cluster://): slots from CLUSTER SLOTS, a key's slot by CRC16 with {hash tags} (cluster.h), MOVED
// (the map is corrected and refreshed) and ASK (ASKING, then the command) followed up to 5 times. Sentinel
// (redis+sentinel://): the primary's address asked of each sentinel in turn at every (re)connection, each
// exchange bounded by connect_timeout (sentinel.h), and checked with ROLE.
//
// Thread safety: exec(), on_every_connection() and Script::eval() may be called from any thread, the client's own
// included; callbacks run on the client's thread and must not block. close() must not be called from a callback.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "store/redis/resp.h"
#include "store/redis/url.h"

namespace rk::store::redis {

struct Error {
  enum class Kind : std::uint8_t { kTimeout, kConnection, kProtocol, kServer, kClosed };
  Kind kind = Kind::kConnection;
  std::string message;  // kServer: Redis's own error text, e.g. "ERR ..."
};
using Result = std::variant<Reply, Error>;  // an error reply from Redis arrives as Error{kServer}, never as Reply

class Client {
 public:
  // Throws std::invalid_argument for TLS or password files that cannot be used (transport.h, base/secret_file.h).
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  using Deadline = std::chrono::steady_clock::time_point;
  // `routing_key` picks the cluster node (ignored otherwise). `done` runs exactly once, with kTimeout at `deadline`
  // at the latest (by default command_timeout from now; a follow-up exchange passes its first command's).
  void exec(std::vector<std::string> args, std::string_view routing_key, std::function<void(Result)> done,
            Deadline deadline = {});
  std::chrono::milliseconds command_timeout() const;
  // `args` on every connection from now on (in its handshake), and on those already open: a command of the client's
  // own (SCRIPT LOAD, FUNCTION LOAD) whose every answer, an error included, goes to `answered` on the client's
  // thread. The connection goes on whatever the answer.
  void on_every_connection(std::vector<std::string> args, std::function<void(const Reply&)> answered);
  void close();                  // fails what is in flight with kClosed, joins the thread; idempotent
  std::string describe() const;  // "redis://127.0.0.1:6379" (never the password)

  struct Stats {
    std::uint64_t writes = 0, commands = 0, timeouts = 0, reconnects = 0, redirects = 0;
    std::uint64_t tls_failures = 0;  // TLS handshakes that failed (a certificate refused, a server not speaking TLS)
    // ClientOptions::spin: spins that met a reply, and those that timed out without one.
    std::uint64_t spins_answered = 0, spins_idle = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace rk::store::redis
