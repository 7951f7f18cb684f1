// store/redis/client_impl.h: the inside of Client (client.h), for the three files that make it up: client.cc (the
// client's thread, its loop and spin, and its public face), connection.cc (a connection's life: opened with its
// handshake, its pipeline written and read, deadlines kept, failed with what it held) and routing.cc (where a
// command goes: a node by its key, a Cluster's slots and redirects, a Sentinel's primary).
//
// Thread safety: post() and the atomic counters from any thread; everything else on the client's thread alone.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/secret_file.h"
#include "store/redis/client.h"
#include "store/redis/cluster.h"
#include "store/redis/sentinel.h"
#include "store/redis/transport.h"

namespace rk::store::redis {

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
  using Clock = std::chrono::steady_clock;
  using milliseconds = std::chrono::milliseconds;

  struct Pending {
    std::vector<std::string> args;
    std::string key;
    std::function<void(Result)> done;
    Clock::time_point deadline{};
    int redirects = 0;
    // Commands of our own (AUTH, SELECT, ROLE, SCRIPT LOAD, ASKING): `check` says whether the connection may go on.
    bool internal = false;
    std::function<bool(const Reply&)> check;
  };

  static void finish(Pending& p, Result r) {
    if (p.internal || !p.done) return;
    auto done = std::move(p.done);
    done(std::move(r));
  }

  struct Node;

  // One connection (its bytes go through `link`, made anew at each one: transport.h). `gen` changes at every
  // (re)connection, so that handlers of a closed link do nothing. kDiscovering (Sentinel only): the primary's
  // address is being asked of the sentinels by `asker`; commands queue as while connecting.
  struct Conn {
    enum class State : std::uint8_t { kDown, kDiscovering, kConnecting, kReady };
    explicit Conn(Node& n) : node(n) {}
    std::shared_ptr<Link> link;
    Node& node;
    State state = State::kDown;
    std::uint64_t gen = 0;
    std::string out;           // encoded, not yet written
    bool busy = false;         // a write in flight
    std::deque<Pending> sent;  // in the order they will be answered: what is being written and `out` hold too
    Parser parser;
    Clock::time_point connect_deadline{};
    std::unique_ptr<SentinelAsker> asker;  // the sentinel node's connections only
  };

  struct Node {
    Endpoint endpoint;
    std::vector<std::unique_ptr<Conn>> conns;
    std::size_t next = 0;
    Clock::time_point down_until{};
    milliseconds backoff{0};
    std::string failure;  // why its last connection failed, told to the commands refused during the backoff
  };

  explicit Impl(ClientOptions o);

  ClientOptions options;
  std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain TCP
  std::optional<base::SecretFile> password_file;
  boost::asio::io_context ioc;
  boost::asio::steady_timer timer;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  std::thread thread;
  std::mutex post_mu;                                  // exec() vs close(): nothing is posted after the shutdown
  bool closing = false;                                // under post_mu
  bool closed = false;                                 // the client's thread only
  std::map<std::string, std::unique_ptr<Node>> nodes;  // by "host:port"
  std::vector<Node*> slots = std::vector<Node*>(kSlots, nullptr);
  Node* sentinel_node = nullptr;
  bool refreshing = false;
  Clock::time_point last_refresh{};
  std::size_t seed_turn = 0;
  std::mt19937 rng{std::random_device{}()};
  // Sent in every connection's handshake (on_every_connection()).
  struct Always {
    std::vector<std::string> args;
    std::function<void(const Reply&)> answered;
  };
  std::vector<Always> always;
  std::atomic<std::uint64_t> writes{0}, commands{0}, timeouts{0}, reconnects{0}, redirects{0}, tls_failures{0};
  std::atomic<std::uint64_t> spins_answered{0}, spins_idle{0};
  std::uint64_t replies_read = 0;  // the client's thread only
  unsigned spin_misses = 0;        // spins in a row that timed out (at most 8); the client's thread only
  std::uint32_t spin_skip = 0;     // waits left to sleep through without a spin; the client's thread only

  template <class F>
  bool post(F&& f) {
    std::lock_guard lock(post_mu);
    if (closing) return false;
    boost::asio::post(ioc, std::forward<F>(f));
    return true;
  }

  // The client's thread (client.cc).
  void start();
  void run();
  bool spin();
  bool awaiting() const;
  void shutdown();

  // Where a command goes (routing.cc).
  Node& node_for(const Endpoint& e);
  Node& route(const std::string& key);
  void dispatch(Pending p);
  void discover(Conn& c);
  void found_primary(Conn& c, const Endpoint& primary);
  bool on_error(Conn& c, Pending p, std::string error);
  void refresh_slots();

  // A connection's life (connection.cc).
  void send_to(Node& node, Pending p, bool asking);
  static void push(Conn& c, Pending p);
  void kick(Conn& c);
  void on_every_connection(Always s);
  static Pending always_pending(const Always& s);
  void expire(Pending& p, const std::string& where);
  Conn* pick(Node& node, std::string_view key);
  void connect(Conn& c);
  void open(Conn& c);
  std::vector<Pending> handshake(const Node& node);
  void mark_down(Node& node);
  void flush(Conn& c);
  void read(Conn& c);
  bool on_reply(Conn& c, Reply r);
  void fail_conn(Conn& c, Error::Kind kind, const std::string& message, bool backoff);
  void tick();
  void expire(Conn& c, Clock::time_point now);
};

}  // namespace rk::store::redis
