// store/redis/client.h: a small non-blocking Redis client on Boost.Asio, for ratekeeper's decisions: pipelined,
// with timeouts, reconnection with backoff, AUTH, Redis Cluster routing and Sentinel discovery.
//
//   auto options = rk::redis::ClientOptions::parse_url("redis://127.0.0.1:6379");  // throws on a bad URL
//   rk::redis::Client client(options);
//   client.exec({"INCR", "k"}, "k", [](rk::redis::Result r) { ... });   // on the client's thread, exactly once
//   rk::redis::Script script("return redis.call('INCR', KEYS[1])");
//   script.eval(client, {"k"}, {}, [](rk::redis::Result r) { ... });     // EVALSHA; EVAL after a NOSCRIPT
//
// Pipelining: the commands given while a connection is writing go out together in its next write; replies are
// matched in order. A command not answered within command_timeout of its exec() (connecting, asking the sentinels,
// the handshake, redirects and a script's EVAL after NOSCRIPT included) fails with kTimeout; if Redis owed it the
// next reply, so does everything else in flight on its connection, which is then closed (a late reply can never
// meet the wrong command). A peer that answers a byte at a time, or never, costs each command its timeout and no
// more: nothing waits for a peer on the client's thread. While a node cannot be reached, commands to it fail at
// once (kConnection) until its backoff has passed; then one reconnection is tried.
//
// Cluster (redis+cluster://): slots from CLUSTER SLOTS, a key's slot by CRC16 with {hash tags}, MOVED (the map
// is corrected and refreshed) and ASK (ASKING, then the command) followed up to 5 times. Sentinel
// (redis+sentinel://): the primary's address asked of each sentinel in turn at every (re)connection, each
// exchange bounded by connect_timeout, and checked with ROLE.
//
// Thread safety: exec() and Script::eval() may be called from any thread, the client's own included; callbacks run
// on the client's thread and must not block. close() must not be called from a callback.
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

namespace rk::redis {

struct Error {
  enum class Kind : std::uint8_t { kTimeout, kConnection, kProtocol, kServer, kClosed };
  Kind kind = Kind::kConnection;
  std::string message;  // kServer: Redis's own error text, e.g. "ERR ..."
};
using Result = std::variant<Reply, Error>;  // an error reply from Redis arrives as Error{kServer}, never as Reply

struct Endpoint {
  std::string host;
  std::uint16_t port = 6379;
};

struct ClientOptions {
  enum class Mode : std::uint8_t { kSingle, kCluster, kSentinel };
  // redis://[user[:password]@]host[:port][/db], redis+cluster://[user[:password]@]h1:p1,h2:p2,...,
  // redis+sentinel://[user[:password]@]h1:p1[,h2:p2]/primary-name. Throws std::invalid_argument naming the problem.
  static ClientOptions parse_url(std::string_view url);

  Mode mode = Mode::kSingle;
  std::vector<Endpoint> endpoints;  // the server; the cluster's seeds; the sentinels
  std::string primary_name;         // sentinel
  std::string username, password;
  int db = 0;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds command_timeout{100};
  int connections_per_node = 2;
  std::chrono::milliseconds backoff_min{50};
  std::chrono::milliseconds backoff_max{2000};
};

class Client {
 public:
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
  void close();                  // fails what is in flight with kClosed, joins the thread; idempotent
  std::string describe() const;  // "redis://127.0.0.1:6379" (never the password)

  struct Stats {
    std::uint64_t writes = 0, commands = 0, timeouts = 0, reconnects = 0, redirects = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Redis Cluster's key slot: CRC16 (XMODEM) of the key, or of its first non-empty {hash tag}, mod 16384.
std::uint16_t key_slot(std::string_view key);
std::uint16_t crc16(std::string_view data);
std::string sha1_hex(std::string_view data);

class Script {
 public:
  explicit Script(std::string source);
  const std::string& sha1() const { return sha1_; }
  const std::string& source() const { return source_; }
  // EVALSHA sha numkeys keys... args...; on NOSCRIPT, EVAL (which also caches the script) once. Routed by keys[0].
  void eval(Client& client, std::vector<std::string> keys, std::vector<std::string> args,
            std::function<void(Result)> done) const;

 private:
  std::string source_;
  std::string sha1_;
};

}  // namespace rk::redis
