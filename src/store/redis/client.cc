// store/redis/client.cc: the client's connections, their pipelines and deadlines, and where each command goes
// (client.h). What a URL says is in url.cc, the Sentinel exchange in sentinel.cc, the Cluster's slots in cluster.cc.
#include "store/redis/client.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "base/secret_file.h"
#include "store/redis/cluster.h"
#include "store/redis/sentinel.h"
#include "store/redis/transport.h"

namespace rk::redis {

namespace asio = boost::asio;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr int kMaxRedirects = 5;

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

void finish(Pending& p, Result r) {
  if (p.internal || !p.done) return;
  auto done = std::move(p.done);
  done(std::move(r));
}

}  // namespace

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
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
    std::string out;      // encoded, not yet written
    bool busy = false;    // a write in flight
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

  explicit Impl(ClientOptions o)
      : options(std::move(o)), tls(make_tls_context(options)), timer(ioc), work(asio::make_work_guard(ioc)) {
    if (!options.password_file.empty()) password_file.emplace("--redis-password-file", options.password_file);
    if (options.connections_per_node < 1) options.connections_per_node = 1;
    if (options.mode == ClientOptions::Mode::kSentinel) {
      sentinel_node = &node_for(Endpoint{"0.0.0.0", 0});  // its endpoint is asked of the sentinels at each connection
    }
  }

  ClientOptions options;
  std::shared_ptr<asio::ssl::context> tls;  // null: plain TCP
  std::optional<base::SecretFile> password_file;
  asio::io_context ioc;
  asio::steady_timer timer;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;
  std::mutex post_mu;          // exec() vs close(): nothing is posted after the shutdown
  bool closing = false;        // under post_mu
  bool closed = false;         // the client's thread only
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
  unsigned spin_misses = 0;     // spins in a row that timed out (at most 8); the client's thread only
  std::uint32_t spin_skip = 0;  // waits left to sleep through without a spin; the client's thread only

  Node& node_for(const Endpoint& e) {
    auto& n = nodes[endpoint_text(e)];
    if (!n) {
      n = std::make_unique<Node>();
      n->endpoint = e;
      for (int i = 0; i < options.connections_per_node; ++i) n->conns.push_back(std::make_unique<Conn>(*n));
    }
    return *n;
  }

  Node& route(const std::string& key) {
    switch (options.mode) {
      case ClientOptions::Mode::kSingle: return node_for(options.endpoints[0]);
      case ClientOptions::Mode::kSentinel: return *sentinel_node;
      case ClientOptions::Mode::kCluster: break;
    }
    if (Node* n = slots[key_slot(key)]) return *n;
    return node_for(options.endpoints[seed_turn % options.endpoints.size()]);
  }

  void start() {
    tick();
    thread = std::thread([self = shared_from_this()] { self->run(); });
    if (options.mode == ClientOptions::Mode::kCluster) post([this] { refresh_slots(); });
  }

  // The client's thread: Asio's loop, with a spin (ClientOptions::spin) before each sleep while commands await
  // their replies.
  void run() {
    if (options.spin.count() <= 0) {
      ioc.run();
      return;
    }
    while (!ioc.stopped()) {
      if (awaiting()) {
        if (spin_skip > 0) {
          --spin_skip;
        } else if (spin()) {
          continue;
        }
      }
      ioc.run_one();
    }
  }

  // Polls the connections (and runs what other threads posted) for up to options.spin, while commands await
  // replies. True if it ran anything. A spin that timed out without a reply backs the next ones off; one that met a
  // reply ends them.
  bool spin() {
    const auto until = Clock::now() + options.spin;
    const std::uint64_t before = replies_read;
    bool ran = false;
    do {
      ran = ioc.poll() > 0 || ran;
      if (replies_read != before) {
        spins_answered.fetch_add(1, std::memory_order_relaxed);
        spin_misses = 0;
        return true;
      }
    } while (!ioc.stopped() && awaiting() && Clock::now() < until);
    if (ioc.stopped() || !awaiting()) return ran;  // nothing awaits now (failed, closed): neither kind of spin
    spins_idle.fetch_add(1, std::memory_order_relaxed);
    spin_skip = 1u << spin_misses;
    spin_misses = std::min(spin_misses + 1, 8u);
    return ran;
  }

  // Whether a command of a connection made is waiting for its reply.
  bool awaiting() const {
    for (const auto& [_, n] : nodes) {
      for (const auto& c : n->conns) {
        if (c->state == Conn::State::kReady && !c->sent.empty()) return true;
      }
    }
    return false;
  }

  template <class F>
  bool post(F&& f) {
    std::lock_guard lock(post_mu);
    if (closing) return false;
    asio::post(ioc, std::forward<F>(f));
    return true;
  }

  void dispatch(Pending p) {
    if (closed) return finish(p, Error{Error::Kind::kClosed, "the Redis client is closed"});
    Node& node = route(p.key);  // before p is moved from: argument order is unspecified
    send_to(node, std::move(p), false);
  }

  // `p.deadline` was set when the caller gave the command, and stays through redirects and a script's EVAL after
  // NOSCRIPT: connecting, discovering and following included, the caller's answer never waits longer.
  void send_to(Node& node, Pending p, bool asking) {
    Conn* conn = pick(node, p.key);
    const auto now = Clock::now();
    if (now > p.deadline) return expire(p, "from Redis at " + endpoint_text(node.endpoint));
    if (conn->state == Conn::State::kDown) {
      if (now < node.down_until) {
        // A dead node may have been replaced (a replica promoted): ask the cluster again, at most every 100 ms.
        if (options.mode == ClientOptions::Mode::kCluster && now - last_refresh > milliseconds(100)) refresh_slots();
        return finish(p, Error{Error::Kind::kConnection, "cannot reach Redis at " + endpoint_text(node.endpoint) +
                                                              " (retrying after a backoff" +
                                                              (node.failure.empty() ? "" : "; " + node.failure) +
                                                              ")"});
      }
      connect(*conn);
      if (conn->state == Conn::State::kDown) {
        return finish(p, Error{Error::Kind::kConnection, "cannot reach Redis at " + endpoint_text(node.endpoint)});
      }
    }
    if (asking) push(*conn, Pending{.args = {"ASKING"}, .deadline = p.deadline, .internal = true});
    push(*conn, std::move(p));
    commands.fetch_add(1, std::memory_order_relaxed);
    kick(*conn);
  }

  // A command on the connection's pipeline, to go out with its next write (kick()).
  static void push(Conn& c, Pending p) {
    encode(c.out, p.args);
    c.sent.push_back(std::move(p));
  }

  void kick(Conn& c) {
    if (c.state == Conn::State::kReady && !c.busy && !c.out.empty()) flush(c);
  }

  // A command for every connection: in the handshake of those to come, and now on those already made (a
  // connection still asking the sentinels sends it in its handshake).
  void on_every_connection(Always s) {
    const auto deadline = Clock::now() + options.command_timeout;
    for (auto& [_, n] : nodes) {
      for (auto& c : n->conns) {
        if (c->state != Conn::State::kConnecting && c->state != Conn::State::kReady) continue;
        Pending p = always_pending(s);
        p.deadline = deadline;
        push(*c, std::move(p));
        kick(*c);
      }
    }
    always.push_back(std::move(s));
  }

  static Pending always_pending(const Always& s) {
    return Pending{.args = s.args, .internal = true, .check = [answered = s.answered](const Reply& r) {
                     answered(r);
                     return true;
                   }};
  }

  void expire(Pending& p, const std::string& where) {
    timeouts.fetch_add(1, std::memory_order_relaxed);
    finish(p, Error{Error::Kind::kTimeout, "no answer " + where + " within " +
                                               std::to_string(options.command_timeout.count()) + " ms"});
  }

  // A key always goes on the same connection while it is up, so that one key's commands keep their order; keyless
  // commands take turns.
  Conn* pick(Node& node, std::string_view key) {
    const std::size_t n = node.conns.size();
    const std::size_t first = key.empty() ? node.next++ % n : std::hash<std::string_view>{}(key) % n;
    for (std::size_t i = 0; i < n; ++i) {
      Conn* c = node.conns[(first + i) % n].get();
      if (c->state != Conn::State::kDown) return c;
    }
    return node.conns[first].get();
  }

  void connect(Conn& c) {
    c.gen++;
    c.parser = Parser();
    reconnects.fetch_add(1, std::memory_order_relaxed);
    if (&c.node != sentinel_node) return open(c);
    c.state = Conn::State::kDiscovering;
    discover(c);
  }

  // Sentinel: the primary's address is asked of the sentinels (sentinel.h). Nothing blocks: the commands waiting
  // meanwhile are answered at their own deadlines by tick().
  void discover(Conn& c) {
    if (!c.asker) c.asker = std::make_unique<SentinelAsker>(ioc, options, tls, tls_failures);
    c.asker->ask([this, &c](std::optional<Endpoint> primary) {
      if (primary) return found_primary(c, *primary);
      const std::string& why = c.asker->last_failure();
      fail_conn(c, Error::Kind::kConnection,
                "no sentinel named the primary '" + options.primary_name + "' within " +
                    std::to_string(options.connect_timeout.count()) + " ms" + (why.empty() ? "" : " (" + why + ")"),
                true);
    });
  }

  void found_primary(Conn& c, const Endpoint& primary) {
    Node& node = c.node;
    if (primary.host != node.endpoint.host || primary.port != node.endpoint.port) {
      for (auto& other : node.conns) {  // the primary moved: every connection goes to the new one
        if (other.get() != &c && (other->state == Conn::State::kConnecting || other->state == Conn::State::kReady)) {
          fail_conn(*other, Error::Kind::kConnection, "the primary moved", false);
        }
      }
      node.endpoint = primary;
    }
    open(c);
  }

  // The connection (the name resolved again, and for rediss:// the TLS handshake: all within connect_timeout),
  // with Redis's handshake first: AUTH, SELECT, with a sentinel's answer ROLE to be sure it is the primary, and the
  // scripts. Commands already queued (while discovering) go after it, in the same write.
  void open(Conn& c) {
    Node& node = c.node;
    c.link = std::make_shared<Link>(ioc, tls, options.tls_files.server_name);
    c.state = Conn::State::kConnecting;
    c.connect_deadline = Clock::now() + options.connect_timeout;
    std::vector<Pending> hello = handshake(node);
    std::string head;
    for (const Pending& h : hello) encode(head, h.args);
    c.out.insert(0, head);
    for (auto it = hello.rbegin(); it != hello.rend(); ++it) {
      it->deadline = c.connect_deadline + options.command_timeout;
      c.sent.push_front(std::move(*it));
    }
    const std::uint64_t gen = c.gen;
    c.link->open(node.endpoint, [this, &c, gen](const std::optional<LinkFailure>& failed) {
      if (gen != c.gen || c.state != Conn::State::kConnecting) return;
      if (failed) {
        if (failed->tls) tls_failures.fetch_add(1, std::memory_order_relaxed);
        return fail_conn(c, Error::Kind::kConnection, failed->message, true);
      }
      c.state = Conn::State::kReady;
      c.node.backoff = milliseconds(0);
      read(c);
      kick(c);
    });
  }

  // The password file's, read again if it changed (base/secret_file.h), wins over the URL's.
  std::vector<Pending> handshake(const Node& node) {
    std::vector<Pending> hello;
    const auto from_file = password_file ? password_file->current() : nullptr;
    const std::string& password = from_file ? *from_file : options.password;
    if (!password.empty()) {
      Pending a{.internal = true};
      a.args = options.username.empty() ? std::vector<std::string>{"AUTH", password}
                                        : std::vector<std::string>{"AUTH", options.username, password};
      a.check = [](const Reply& r) { return r.type != Reply::Type::kError; };
      hello.push_back(std::move(a));
    }
    if (options.db != 0) {
      hello.push_back(Pending{.args = {"SELECT", std::to_string(options.db)}, .internal = true,
                              .check = [](const Reply& r) { return r.type != Reply::Type::kError; }});
    }
    if (&node == sentinel_node) {
      hello.push_back(Pending{.args = {"ROLE"}, .internal = true, .check = [](const Reply& r) {
                                return r.type == Reply::Type::kArray && !r.elements.empty() &&
                                       r.elements[0].str == "master";
                              }});
    }
    for (const Always& s : always) hello.push_back(always_pending(s));
    return hello;
  }

  void mark_down(Node& node) {
    node.backoff = std::clamp(node.backoff * 2, options.backoff_min, options.backoff_max);
    const auto jitter = std::uniform_int_distribution<long>(0, node.backoff.count() / 4)(rng);
    node.down_until = Clock::now() + node.backoff + milliseconds(jitter);
  }

  void flush(Conn& c) {
    c.busy = true;
    std::string bytes;
    bytes.swap(c.out);
    writes.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t gen = c.gen;
    c.link->write(std::move(bytes), [this, &c, gen](error_code e) {
      if (gen != c.gen) return;
      c.busy = false;
      if (e)
        return fail_conn(c, Error::Kind::kConnection,
                         "writing to Redis at " + endpoint_text(c.node.endpoint) + ": " + e.message(), true);
      if (!c.out.empty()) flush(c);
    });
  }

  void read(Conn& c) {
    const std::uint64_t gen = c.gen;
    c.link->read([this, &c, gen](error_code e, std::string_view bytes) {
      if (gen != c.gen) return;
      if (e)
        return fail_conn(c, Error::Kind::kConnection,
                         "Redis at " + endpoint_text(c.node.endpoint) + " closed the connection: " + e.message(), true);
      c.parser.feed(bytes);
      while (auto r = c.parser.next()) {
        if (!on_reply(c, std::move(*r))) return;
        if (gen != c.gen) return;
      }
      if (c.parser.failed())
        return fail_conn(c, Error::Kind::kProtocol, "malformed reply from Redis: " + c.parser.error(), true);
      read(c);
    });
  }

  // False if the connection was failed.
  bool on_reply(Conn& c, Reply r) {
    if (c.sent.empty()) {
      fail_conn(c, Error::Kind::kProtocol, "a reply from Redis that no command asked for", true);
      return false;
    }
    ++replies_read;
    Pending p = std::move(c.sent.front());
    c.sent.pop_front();
    if (p.internal) {
      if (p.check && !p.check(r)) {
        fail_conn(c, Error::Kind::kConnection,
                  "Redis refused " + p.args[0] + ": " + (r.str.empty() ? "not the primary" : r.str), true);
        return false;
      }
      return true;
    }
    if (r.type == Reply::Type::kError) return on_error(c, std::move(p), std::move(r.str));
    finish(p, std::move(r));
    return true;
  }

  // A redirect is followed (if the command is not answered already: timed out); any other error is the caller's.
  // False if the connection was failed.
  bool on_error(Conn& c, Pending p, std::string error) {
    if (p.done && p.redirects < kMaxRedirects) {
      if (const std::optional<Redirect> to = parse_redirect(error)) {
        Node& target = node_for(to->to);
        ++p.redirects;
        redirects.fetch_add(1, std::memory_order_relaxed);
        if (!to->ask) {
          if (to->slot >= 0) slots[static_cast<std::size_t>(to->slot)] = &target;
          refresh_slots();
        }
        send_to(target, std::move(p), to->ask);
        return true;
      }
    }
    if (error.starts_with("CLUSTERDOWN") || error.starts_with("TRYAGAIN")) refresh_slots();
    // The primary we know has become a replica (a Sentinel failover): ask the sentinels again.
    const bool demoted = &c.node == sentinel_node && error.starts_with("READONLY");
    finish(p, Error{demoted ? Error::Kind::kConnection : Error::Kind::kServer, std::move(error)});
    if (demoted) {
      fail_conn(c, Error::Kind::kConnection, "the primary was demoted", false);
      return false;
    }
    return true;
  }

  void fail_conn(Conn& c, Error::Kind kind, const std::string& message, bool backoff) {
    c.gen++;
    if (c.asker) c.asker->cancel();
    if (c.link) c.link->close();
    c.link.reset();
    c.state = Conn::State::kDown;
    c.busy = false;
    c.out.clear();
    std::deque<Pending> failed;
    failed.swap(c.sent);
    if (backoff) {
      mark_down(c.node);
      c.node.failure = message;
    }
    if (options.mode == ClientOptions::Mode::kCluster && kind != Error::Kind::kClosed) {
      ++seed_turn;
      refresh_slots();
    }
    for (Pending& p : failed) finish(p, Error{kind, message});
  }

  // CLUSTER SLOTS from any node that answers; the map is replaced whole.
  void refresh_slots() {
    if (options.mode != ClientOptions::Mode::kCluster || refreshing || closed) return;
    refreshing = true;
    last_refresh = Clock::now();
    Node* from = nullptr;
    std::size_t ready = 0;
    for (auto& [_, n] : nodes) {
      for (auto& c : n->conns) {
        if (c->state == Conn::State::kReady && (!from || ++ready % 2 == 0)) from = n.get();  // spread the asking
      }
    }
    if (!from) from = &node_for(options.endpoints[seed_turn % options.endpoints.size()]);
    Pending p{.args = {"CLUSTER", "SLOTS"}, .deadline = last_refresh + options.command_timeout};
    const Endpoint asked = from->endpoint;
    p.done = [this, asked](Result r) {
      refreshing = false;
      auto* reply = std::get_if<Reply>(&r);
      if (!reply || reply->type != Reply::Type::kArray) {
        ++seed_turn;
        return;
      }
      for (const SlotRange& range : slot_ranges(*reply, asked)) {
        Node& n = node_for(range.primary);
        std::fill(slots.begin() + static_cast<std::ptrdiff_t>(range.lo),
                  slots.begin() + static_cast<std::ptrdiff_t>(range.hi) + 1, &n);
      }
    };
    send_to(*from, std::move(p), false);
  }

  void tick() {
    const auto period = std::clamp<Clock::duration>(std::min(options.command_timeout, options.connect_timeout) / 4,
                                                    milliseconds(2), milliseconds(100));
    timer.expires_after(period);
    timer.async_wait([this](error_code e) {
      if (e || closed) return;
      const auto now = Clock::now();
      for (auto& [_, n] : nodes) {
        for (auto& c : n->conns) expire(*c, now);
      }
      tick();
    });
  }

  void expire(Conn& c, Clock::time_point now) {
    const std::string where = "from Redis at " + endpoint_text(c.node.endpoint);
    switch (c.state) {
      case Conn::State::kDown: return;
      case Conn::State::kConnecting:
        if (now > c.connect_deadline) {
          return fail_conn(c, Error::Kind::kConnection,
                           "no connection to Redis at " + endpoint_text(c.node.endpoint) + " within " +
                               std::to_string(options.connect_timeout.count()) + " ms",
                           true);
        }
        [[fallthrough]];
      case Conn::State::kDiscovering:
        // Still connecting (a paused Redis accepts connections and answers nothing) or asking the sentinels (whose
        // exchange has its own deadline): the commands waiting past their deadline are answered now; the connection
        // goes on, and their late replies will be dropped.
        for (Pending& p : c.sent) {
          if (!p.internal && p.done && now > p.deadline) expire(p, where);
        }
        return;
      case Conn::State::kReady: break;
    }
    // Redis answers in order: if what it must answer next (a handshake command, or the oldest caller's command) is
    // late, the connection is recycled and everything on it fails. A later command past its own deadline (one
    // redirected here, or a script's EVAL, keeps its first deadline) is answered alone, its reply dropped.
    bool first = true;
    for (Pending& p : c.sent) {
      if (!p.internal && !p.done) continue;  // answered already
      if (now > p.deadline) {
        if (first) {
          timeouts.fetch_add(1, std::memory_order_relaxed);
          return fail_conn(c, Error::Kind::kTimeout, "no answer " + where + " within " +
                                                         std::to_string(options.command_timeout.count()) + " ms", true);
        }
        if (!p.internal) expire(p, where);
      }
      first = first && p.internal;
    }
  }

  void shutdown() {
    closed = true;
    timer.cancel();
    for (auto& [_, n] : nodes) {
      for (auto& c : n->conns) fail_conn(*c, Error::Kind::kClosed, "the Redis client is closed", false);
    }
    work.reset();
  }
};

Client::Client(ClientOptions options) : impl_(std::make_shared<Impl>(std::move(options))) { impl_->start(); }

Client::~Client() { close(); }

void Client::exec(std::vector<std::string> args, std::string_view routing_key, std::function<void(Result)> done,
                  Deadline deadline) {
  if (deadline == Deadline{}) deadline = Clock::now() + impl_->options.command_timeout;
  Pending p{.args = std::move(args), .key = std::string(routing_key), .done = std::move(done), .deadline = deadline};
  auto shared = std::make_shared<Pending>(std::move(p));
  Impl* impl = impl_.get();
  if (!impl->post([impl, shared] { impl->dispatch(std::move(*shared)); })) {
    finish(*shared, Error{Error::Kind::kClosed, "the Redis client is closed"});
  }
}

void Client::close() {
  Impl* impl = impl_.get();
  {
    std::lock_guard lock(impl->post_mu);
    if (impl->closing) return;
    asio::post(impl->ioc, [impl] { impl->shutdown(); });
    impl->closing = true;
  }
  if (impl->thread.joinable()) impl->thread.join();
}

std::chrono::milliseconds Client::command_timeout() const { return impl_->options.command_timeout; }

void Client::on_every_connection(std::vector<std::string> args, std::function<void(const Reply&)> answered) {
  Impl* impl = impl_.get();
  auto s = std::make_shared<Impl::Always>(Impl::Always{std::move(args), std::move(answered)});
  impl->post([impl, s] { impl->on_every_connection(std::move(*s)); });
}

std::string Client::describe() const { return redis::describe(impl_->options); }

Client::Stats Client::stats() const {
  return {impl_->writes.load(),       impl_->commands.load(),       impl_->timeouts.load(),
          impl_->reconnects.load(),   impl_->redirects.load(),      impl_->tls_failures.load(),
          impl_->spins_answered.load(), impl_->spins_idle.load()};
}

}  // namespace rk::redis
