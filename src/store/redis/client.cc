#include "store/redis/client.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

namespace rk::redis {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
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
  // Commands of our own (AUTH, SELECT, ROLE, ASKING): `check` says whether the connection may go on.
  bool internal = false;
  std::function<bool(const Reply&)> check;
};

void finish(Pending& p, Result r) {
  if (p.internal || !p.done) return;
  auto done = std::move(p.done);
  done(std::move(r));
}

std::string endpoint_text(const Endpoint& e) {
  return (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

Endpoint parse_endpoint(std::string_view text, std::string_view url) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("'" + std::string(url) + "': " + why);
  };
  Endpoint e;
  std::string_view host = text, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) throw bad("unclosed '[' in '" + std::string(text) + "'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw bad("expected ':' after ']' in '" + std::string(text) + "'");
      port = text.substr(close + 2);
    }
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) throw bad("no host in '" + std::string(text) + "'");
  e.host = host == "localhost" ? "127.0.0.1" : std::string(host);
  if (!port.empty()) {
    unsigned v = 0;
    const auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc{} || p != port.data() + port.size() || v == 0 || v > 65535) {
      throw bad("port '" + std::string(port) + "' is not a number from 1 to 65535");
    }
    e.port = static_cast<std::uint16_t>(v);
  }
  error_code ec;
  asio::ip::make_address(e.host, ec);
  if (ec) throw bad("'" + e.host + "' is not an IP address (host names are not resolved)");
  return e;
}

// A sentinel's answer is two short strings: a parser with room for little more keeps a hostile one from making us
// buffer megabytes within the exchange's deadline.
constexpr ParserLimits kSentinelLimits{.max_bulk = 1024, .max_elements = 16, .max_depth = 2};

// SENTINEL get-master-addr-by-name's answer, or nullopt (nil: the sentinel does not know the name).
std::optional<Endpoint> primary_from(const Reply& r) {
  if (r.type != Reply::Type::kArray || r.elements.size() != 2) return std::nullopt;
  try {
    return parse_endpoint(r.elements[0].str + ":" + r.elements[1].str, "sentinel's answer");
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace

// ---- options ----

ClientOptions ClientOptions::parse_url(std::string_view url) {
  ClientOptions o;
  const auto bad = [&](const std::string& why) { return std::invalid_argument("'" + std::string(url) + "': " + why); };
  std::string_view rest;
  if (url.starts_with("redis://")) {
    o.mode = Mode::kSingle;
    rest = url.substr(8);
  } else if (url.starts_with("redis+cluster://")) {
    o.mode = Mode::kCluster;
    rest = url.substr(16);
  } else if (url.starts_with("redis+sentinel://")) {
    o.mode = Mode::kSentinel;
    rest = url.substr(17);
  } else {
    throw bad("the scheme must be redis://, redis+cluster:// or redis+sentinel://");
  }
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view user = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = user.find(':');
    if (colon == std::string_view::npos) {
      o.password = std::string(user);  // redis://secret@host: a password alone, as redis-cli takes it
    } else {
      o.username = std::string(user.substr(0, colon));
      o.password = std::string(user.substr(colon + 1));
    }
  }
  std::string_view hosts = rest, path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    hosts = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  while (!hosts.empty()) {
    const auto comma = hosts.find(',');
    o.endpoints.push_back(parse_endpoint(hosts.substr(0, comma), url));
    if (o.mode == Mode::kSentinel && o.endpoints.back().port == 6379 && hosts.substr(0, comma).find(':') == std::string_view::npos) {
      o.endpoints.back().port = 26379;
    }
    hosts = comma == std::string_view::npos ? std::string_view{} : hosts.substr(comma + 1);
  }
  if (o.endpoints.empty()) throw bad("no host");
  if (o.mode == Mode::kSingle && o.endpoints.size() > 1) throw bad("redis:// takes one host (use redis+cluster://)");
  if (o.mode == Mode::kSentinel) {
    if (path.empty()) throw bad("redis+sentinel:// needs the primary's name: redis+sentinel://host:port/name");
    o.primary_name = std::string(path);
  } else if (!path.empty()) {
    if (o.mode == Mode::kCluster) throw bad("a cluster has no database number");
    unsigned v = 0;
    const auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), v);
    if (ec != std::errc{} || p != path.data() + path.size() || v > 15) throw bad("database '" + std::string(path) + "' is not a number from 0 to 15");
    o.db = static_cast<int>(v);
  }
  return o;
}

// ---- the client ----

struct Client::Impl : std::enable_shared_from_this<Client::Impl> {
  struct Node;

  // One TCP connection. `gen` changes at every (re)connection, so that handlers of a closed socket do nothing.
  // kDiscovering (Sentinel only): the primary's address is being asked of the sentinels on `probe`; commands queue
  // as while connecting.
  struct Conn {
    enum class State : std::uint8_t { kDown, kDiscovering, kConnecting, kReady };
    Conn(asio::io_context& ioc, Node& n) : socket(ioc), node(n), probe(ioc), probe_timer(ioc) {}
    tcp::socket socket;
    Node& node;
    State state = State::kDown;
    std::uint64_t gen = 0;
    std::string out;      // encoded, not yet written
    std::string writing;  // being written
    bool busy = false;    // a write in flight
    std::deque<Pending> sent;  // in the order they will be answered: what `writing` and `out` hold too
    Parser parser;
    std::array<char, 16384> buf{};  // the probe's too: `socket` is not open while discovering
    Clock::time_point connect_deadline{};
    tcp::socket probe;               // to the sentinel being asked
    asio::steady_timer probe_timer;  // its whole exchange's deadline
    std::uint64_t probe_gen = 0;     // changes at every sentinel asked, so that handlers of an earlier one do nothing
    Parser probe_parser{kSentinelLimits};
    std::string probe_out;
  };

  struct Node {
    Endpoint endpoint;
    std::vector<std::unique_ptr<Conn>> conns;
    std::size_t next = 0;
    Clock::time_point down_until{};
    milliseconds backoff{0};
  };

  explicit Impl(ClientOptions o) : options(std::move(o)), timer(ioc), work(asio::make_work_guard(ioc)) {
    if (options.connections_per_node < 1) options.connections_per_node = 1;
    if (options.mode == ClientOptions::Mode::kSentinel) {
      sentinel_node = &node_for(Endpoint{"0.0.0.0", 0});  // its endpoint is asked of the sentinels at each connection
    }
  }

  ClientOptions options;
  asio::io_context ioc;
  asio::steady_timer timer;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;
  std::mutex post_mu;          // exec() vs close(): nothing is posted after the shutdown
  bool closing = false;        // under post_mu
  bool closed = false;         // the client's thread only
  std::map<std::string, std::unique_ptr<Node>> nodes;  // by "host:port"
  std::vector<Node*> slots = std::vector<Node*>(16384, nullptr);
  Node* sentinel_node = nullptr;
  bool refreshing = false;
  Clock::time_point last_refresh{};
  std::size_t seed_turn = 0;
  std::mt19937 rng{std::random_device{}()};
  std::atomic<std::uint64_t> writes{0}, commands{0}, timeouts{0}, reconnects{0}, redirects{0};

  Node& node_for(const Endpoint& e) {
    auto& n = nodes[endpoint_text(e)];
    if (!n) {
      n = std::make_unique<Node>();
      n->endpoint = e;
      for (int i = 0; i < options.connections_per_node; ++i) n->conns.push_back(std::make_unique<Conn>(ioc, *n));
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
    thread = std::thread([self = shared_from_this()] { self->ioc.run(); });
    if (options.mode == ClientOptions::Mode::kCluster) post([this] { refresh_slots(); });
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
                                                              " (retrying after a backoff)"});
      }
      connect(*conn);
      if (conn->state == Conn::State::kDown) {
        return finish(p, Error{Error::Kind::kConnection, "cannot reach Redis at " + endpoint_text(node.endpoint)});
      }
    }
    if (asking) {
      Pending a{.args = {"ASKING"}, .deadline = p.deadline, .internal = true};
      encode(conn->out, a.args);
      conn->sent.push_back(std::move(a));
    }
    encode(conn->out, p.args);
    conn->sent.push_back(std::move(p));
    commands.fetch_add(1, std::memory_order_relaxed);
    if (conn->state == Conn::State::kReady && !conn->busy) flush(*conn);
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
    discover(c, 0);
  }

  // Sentinel: the primary's address is asked of each sentinel in turn, each exchange (connect, question, answer)
  // bounded as a whole by connect_timeout, so that a sentinel answering a byte at a time, or never, costs that and
  // no more. Nothing blocks: the commands waiting meanwhile are answered at their own deadlines by tick().
  void discover(Conn& c, std::size_t turn) {
    if (turn >= options.endpoints.size()) {
      return fail_conn(c, Error::Kind::kConnection, "no sentinel named the primary '" + options.primary_name +
                                                        "' within " + std::to_string(options.connect_timeout.count()) +
                                                        " ms", true);
    }
    const Endpoint& sentinel = options.endpoints[turn];
    const std::uint64_t gen = c.gen, probe = ++c.probe_gen;
    auto stale = [&c, gen, probe] { return gen != c.gen || probe != c.probe_gen; };
    auto next = [this, &c, stale, turn] {
      if (stale()) return;
      end_probe(c);
      discover(c, turn + 1);
    };
    error_code bad;
    const auto address = asio::ip::make_address(sentinel.host, bad);
    if (bad) return next();
    c.probe = tcp::socket(ioc);
    c.probe_parser = Parser(kSentinelLimits);
    c.probe_out.clear();
    encode(c.probe_out, {"SENTINEL", "get-master-addr-by-name", options.primary_name});
    c.probe_timer.expires_after(options.connect_timeout);
    c.probe_timer.async_wait([next](error_code e) {
      if (!e) next();
    });
    c.probe.async_connect(tcp::endpoint(address, sentinel.port), [this, &c, stale, next](error_code e) {
      if (stale()) return;
      if (e) return next();
      asio::async_write(c.probe, asio::buffer(c.probe_out), [this, &c, stale, next](error_code written, std::size_t) {
        if (stale()) return;
        if (written) return next();
        read_probe(c, stale, next);
      });
    });
  }

  template <class Stale, class Next>
  void read_probe(Conn& c, Stale stale, Next next) {
    c.probe.async_read_some(asio::buffer(c.buf), [this, &c, stale, next](error_code e, std::size_t n) {
      if (stale()) return;
      if (e) return next();
      c.probe_parser.feed(std::string_view(c.buf.data(), n));
      if (auto r = c.probe_parser.next()) {
        const std::optional<Endpoint> primary = primary_from(*r);
        if (!primary) return next();  // nil: this sentinel does not know the name
        end_probe(c);
        return found_primary(c, *primary);
      }
      if (c.probe_parser.failed()) return next();
      read_probe(c, stale, next);
    });
  }

  void end_probe(Conn& c) {
    ++c.probe_gen;
    error_code ignored;
    c.probe.close(ignored);
    c.probe_timer.cancel();
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

  // The TCP connection, with the handshake first: AUTH, SELECT, and with a sentinel's answer, ROLE to be sure it is
  // the primary. Commands already queued (while discovering) go after it.
  void open(Conn& c) {
    Node& node = c.node;
    error_code ec;
    const auto address = asio::ip::make_address(node.endpoint.host, ec);
    if (ec) return fail_conn(c, Error::Kind::kConnection, "'" + node.endpoint.host + "' is not an IP address", true);
    c.socket = tcp::socket(ioc);
    c.state = Conn::State::kConnecting;
    c.connect_deadline = Clock::now() + options.connect_timeout;
    std::vector<Pending> hello;
    if (!options.password.empty()) {
      Pending a{.internal = true};
      a.args = options.username.empty() ? std::vector<std::string>{"AUTH", options.password}
                                        : std::vector<std::string>{"AUTH", options.username, options.password};
      a.check = [](const Reply& r) { return r.type != Reply::Type::kError; };
      hello.push_back(std::move(a));
    }
    if (options.db != 0) {
      hello.push_back(Pending{.args = {"SELECT", std::to_string(options.db)}, .internal = true,
                              .check = [](const Reply& r) { return r.type != Reply::Type::kError; }});
    }
    if (&node == sentinel_node) {
      hello.push_back(Pending{.args = {"ROLE"}, .internal = true, .check = [](const Reply& r) {
                                return r.type == Reply::Type::kArray && !r.elements.empty() && r.elements[0].str == "master";
                              }});
    }
    std::string head;
    for (const Pending& h : hello) encode(head, h.args);
    c.out.insert(0, head);
    for (auto it = hello.rbegin(); it != hello.rend(); ++it) {
      it->deadline = c.connect_deadline + options.command_timeout;
      c.sent.push_front(std::move(*it));
    }
    const std::uint64_t gen = c.gen;
    c.socket.async_connect(tcp::endpoint(address, node.endpoint.port), [this, &c, gen](error_code e) {
      if (gen != c.gen || c.state != Conn::State::kConnecting) return;
      if (e) return fail_conn(c, Error::Kind::kConnection, "cannot connect to Redis at " + endpoint_text(c.node.endpoint) + ": " + e.message(), true);
      error_code ignored;
      c.socket.set_option(tcp::no_delay(true), ignored);
      c.state = Conn::State::kReady;
      c.node.backoff = milliseconds(0);
      read(c);
      if (!c.out.empty() && !c.busy) flush(c);
    });
  }

  void mark_down(Node& node) {
    node.backoff = std::clamp(node.backoff * 2, options.backoff_min, options.backoff_max);
    const auto jitter = std::uniform_int_distribution<long>(0, node.backoff.count() / 4)(rng);
    node.down_until = Clock::now() + node.backoff + milliseconds(jitter);
  }

  void flush(Conn& c) {
    c.busy = true;
    c.writing.clear();
    c.writing.swap(c.out);
    writes.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t gen = c.gen;
    asio::async_write(c.socket, asio::buffer(c.writing), [this, &c, gen](error_code e, std::size_t) {
      if (gen != c.gen) return;
      c.busy = false;
      if (e) return fail_conn(c, Error::Kind::kConnection, "writing to Redis at " + endpoint_text(c.node.endpoint) + ": " + e.message(), true);
      if (!c.out.empty()) flush(c);
    });
  }

  void read(Conn& c) {
    const std::uint64_t gen = c.gen;
    c.socket.async_read_some(asio::buffer(c.buf), [this, &c, gen](error_code e, std::size_t n) {
      if (gen != c.gen) return;
      if (e) return fail_conn(c, Error::Kind::kConnection, "Redis at " + endpoint_text(c.node.endpoint) + " closed the connection: " + e.message(), true);
      c.parser.feed(std::string_view(c.buf.data(), n));
      while (auto r = c.parser.next()) {
        if (!on_reply(c, std::move(*r))) return;
        if (gen != c.gen) return;
      }
      if (c.parser.failed()) return fail_conn(c, Error::Kind::kProtocol, "malformed reply from Redis: " + c.parser.error(), true);
      read(c);
    });
  }

  // False if the connection was failed.
  bool on_reply(Conn& c, Reply r) {
    if (c.sent.empty()) {
      fail_conn(c, Error::Kind::kProtocol, "a reply from Redis that no command asked for", true);
      return false;
    }
    Pending p = std::move(c.sent.front());
    c.sent.pop_front();
    if (p.internal) {
      if (p.check && !p.check(r)) {
        fail_conn(c, Error::Kind::kConnection, "Redis refused " + p.args[0] + ": " + (r.str.empty() ? "not the primary" : r.str), true);
        return false;
      }
      return true;
    }
    if (r.type == Reply::Type::kError) {
      const bool moved = r.str.starts_with("MOVED "), ask = r.str.starts_with("ASK ");
      if ((moved || ask) && p.done && p.redirects < kMaxRedirects) {  // not one answered already (timed out)
        // "MOVED 3999 127.0.0.1:6381"
        const auto sp1 = r.str.find(' '), sp2 = r.str.find(' ', sp1 + 1);
        try {
          const Endpoint to = parse_endpoint(r.str.substr(sp2 + 1), "a redirect");
          Node& target = node_for(to);
          ++p.redirects;
          redirects.fetch_add(1, std::memory_order_relaxed);
          if (moved) {
            const int slot = std::stoi(r.str.substr(sp1 + 1, sp2 - sp1 - 1));
            if (slot >= 0 && slot < 16384) slots[static_cast<std::size_t>(slot)] = &target;
            refresh_slots();
          }
          send_to(target, std::move(p), ask);
          return true;
        } catch (const std::exception&) {
        }
      }
      if (r.str.starts_with("CLUSTERDOWN") || r.str.starts_with("TRYAGAIN")) refresh_slots();
      // The primary we know has become a replica (a Sentinel failover): ask the sentinels again.
      const bool demoted = &c.node == sentinel_node && r.str.starts_with("READONLY");
      finish(p, Error{demoted ? Error::Kind::kConnection : Error::Kind::kServer, std::move(r.str)});
      if (demoted) {
        fail_conn(c, Error::Kind::kConnection, "the primary was demoted", false);
        return false;
      }
      return true;
    }
    finish(p, std::move(r));
    return true;
  }

  void fail_conn(Conn& c, Error::Kind kind, const std::string& message, bool backoff) {
    c.gen++;
    end_probe(c);
    error_code ignored;
    c.socket.close(ignored);
    c.state = Conn::State::kDown;
    c.busy = false;
    c.out.clear();
    c.writing.clear();
    std::deque<Pending> failed;
    failed.swap(c.sent);
    if (backoff) mark_down(c.node);
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
      for (const Reply& range : reply->elements) {
        if (range.type != Reply::Type::kArray || range.elements.size() < 3) continue;
        const Reply& primary = range.elements[2];
        if (primary.type != Reply::Type::kArray || primary.elements.size() < 2) continue;
        const std::int64_t lo = range.elements[0].integer, hi = range.elements[1].integer;
        std::string host = primary.elements[0].str;
        if (host.empty() || host == "?") host = asked.host;
        Endpoint e{host, static_cast<std::uint16_t>(primary.elements[1].integer)};
        Node& n = node_for(e);
        for (std::int64_t s = std::max<std::int64_t>(0, lo); s <= std::min<std::int64_t>(16383, hi); ++s) {
          slots[static_cast<std::size_t>(s)] = &n;
        }
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
          return fail_conn(c, Error::Kind::kConnection, "no connection to Redis at " + endpoint_text(c.node.endpoint) +
                                                            " within " + std::to_string(options.connect_timeout.count()) +
                                                            " ms", true);
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

std::string Client::describe() const {
  const ClientOptions& o = impl_->options;
  std::string s = o.mode == ClientOptions::Mode::kSingle    ? "redis://"
                  : o.mode == ClientOptions::Mode::kCluster ? "redis+cluster://"
                                                            : "redis+sentinel://";
  for (std::size_t i = 0; i < o.endpoints.size(); ++i) s += (i ? "," : "") + endpoint_text(o.endpoints[i]);
  if (o.mode == ClientOptions::Mode::kSentinel) s += "/" + o.primary_name;
  return s;
}

Client::Stats Client::stats() const {
  return {impl_->writes.load(), impl_->commands.load(), impl_->timeouts.load(), impl_->reconnects.load(),
          impl_->redirects.load()};
}

// ---- slots, SHA-1, scripts ----

std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte << 8);
    for (int i = 0; i < 8; ++i) crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

std::uint16_t key_slot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & 16383;
}

std::string sha1_hex(std::string_view data) {
  std::uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  std::string m(data);
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  m += static_cast<char>(0x80);
  while (m.size() % 64 != 56) m += '\0';
  for (int i = 7; i >= 0; --i) m += static_cast<char>((bits >> (i * 8)) & 0xff);
  auto rol = [](std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
  for (std::size_t chunk = 0; chunk < m.size(); chunk += 64) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i) {
      w[i] = 0;
      for (int j = 0; j < 4; ++j) w[i] = (w[i] << 8) | static_cast<unsigned char>(m[chunk + static_cast<std::size_t>(i * 4 + j)]);
    }
    for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDC;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6;
      }
      const std::uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rol(b, 30);
      b = a;
      a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint32_t v : h) {
    for (int i = 28; i >= 0; i -= 4) out += kHex[(v >> i) & 0xf];
  }
  return out;
}

Script::Script(std::string source) : source_(std::move(source)), sha1_(sha1_hex(source_)) {}

void Script::eval(Client& client, std::vector<std::string> keys, std::vector<std::string> args,
                  std::function<void(Result)> done) const {
  std::vector<std::string> cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.push_back("EVALSHA");
  cmd.push_back(sha1_);
  cmd.push_back(std::to_string(keys.size()));
  const std::string routing = keys.empty() ? std::string() : keys[0];
  for (auto& k : keys) cmd.push_back(std::move(k));
  for (auto& a : args) cmd.push_back(std::move(a));
  Client* c = &client;
  const std::string* source = &source_;
  // One deadline for both: loading the script is part of the command's exchange, not a second timeout.
  const Client::Deadline deadline = std::chrono::steady_clock::now() + client.command_timeout();
  client.exec(cmd, routing, [c, source, cmd, routing, deadline, done = std::move(done)](Result r) mutable {
    const auto* e = std::get_if<Error>(&r);
    if (!e || e->kind != Error::Kind::kServer || !e->message.starts_with("NOSCRIPT")) return done(std::move(r));
    cmd[0] = "EVAL";  // also caches the script: the next EVALSHA finds it
    cmd[1] = *source;
    c->exec(std::move(cmd), routing, std::move(done), deadline);
  }, deadline);
}

}  // namespace rk::redis
