// store/redis/connection.cc: a connection of the Redis client (client_impl.h): opened (the name resolved again,
// TLS for rediss://) with its handshake pipelined ahead of the commands waiting; its pipeline written and its
// replies matched in order; deadlines kept by a timer; a node backed off after a failure; and, when it fails,
// everything it held answered with why.
#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/redis/client_impl.h"

namespace rk::store::redis {

using error_code = boost::system::error_code;

// `p.deadline` was set when the caller gave the command, and stays through redirects and a script's EVAL after
// NOSCRIPT: connecting, discovering and following included, the caller's answer never waits longer.
void Client::Impl::send_to(Node& node, Pending p, bool asking) {
  Conn* conn = pick(node, p.key);
  const auto now = Clock::now();
  if (now > p.deadline) return expire(p, "from Redis at " + endpoint_text(node.endpoint));
  if (conn->state == Conn::State::kDown) {
    if (now < node.down_until) {
      // A dead node may have been replaced (a replica promoted): ask the cluster again, at most every 100 ms.
      if (options.mode == ClientOptions::Mode::kCluster && now - last_refresh > milliseconds(100)) refresh_slots();
      return finish(p, Error{Error::Kind::kConnection, "cannot reach Redis at " + endpoint_text(node.endpoint) +
                                                           " (retrying after a backoff" +
                                                           (node.failure.empty() ? "" : "; " + node.failure) + ")"});
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
void Client::Impl::push(Conn& c, Pending p) {
  encode(c.out, p.args);
  c.sent.push_back(std::move(p));
}

void Client::Impl::kick(Conn& c) {
  if (c.state == Conn::State::kReady && !c.busy && !c.out.empty()) flush(c);
}

// A command for every connection: in the handshake of those to come, and now on those already made (a
// connection still asking the sentinels sends it in its handshake).
void Client::Impl::on_every_connection(Always s) {
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

Client::Impl::Pending Client::Impl::always_pending(const Always& s) {
  return Pending{.args = s.args, .internal = true, .check = [answered = s.answered](const Reply& r) {
                   answered(r);
                   return true;
                 }};
}

void Client::Impl::expire(Pending& p, const std::string& where) {
  timeouts.fetch_add(1, std::memory_order_relaxed);
  finish(p, Error{Error::Kind::kTimeout,
                  "no answer " + where + " within " + std::to_string(options.command_timeout.count()) + " ms"});
}

// A key always goes on the same connection while it is up, so that one key's commands keep their order; keyless
// commands take turns.
Client::Impl::Conn* Client::Impl::pick(Node& node, std::string_view key) {
  const std::size_t n = node.conns.size();
  const std::size_t first = key.empty() ? node.next++ % n : std::hash<std::string_view>{}(key) % n;
  for (std::size_t i = 0; i < n; ++i) {
    Conn* c = node.conns[(first + i) % n].get();
    if (c->state != Conn::State::kDown) return c;
  }
  return node.conns[first].get();
}

void Client::Impl::connect(Conn& c) {
  c.gen++;
  c.parser = Parser();
  reconnects.fetch_add(1, std::memory_order_relaxed);
  if (&c.node != sentinel_node) return open(c);
  c.state = Conn::State::kDiscovering;
  discover(c);
}

// The connection (the name resolved again, and for rediss:// the TLS handshake: all within connect_timeout),
// with Redis's handshake first: AUTH, SELECT, with a sentinel's answer ROLE to be sure it is the primary, and the
// scripts. Commands already queued (while discovering) go after it, in the same write.
void Client::Impl::open(Conn& c) {
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
std::vector<Client::Impl::Pending> Client::Impl::handshake(const Node& node) {
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
    hello.push_back(Pending{.args = {"SELECT", std::to_string(options.db)},
                            .internal = true,
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

void Client::Impl::mark_down(Node& node) {
  node.backoff = std::clamp(node.backoff * 2, options.backoff_min, options.backoff_max);
  const auto jitter = std::uniform_int_distribution<long>(0, node.backoff.count() / 4)(rng);
  node.down_until = Clock::now() + node.backoff + milliseconds(jitter);
}

void Client::Impl::flush(Conn& c) {
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

void Client::Impl::read(Conn& c) {
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
bool Client::Impl::on_reply(Conn& c, Reply r) {
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

void Client::Impl::fail_conn(Conn& c, Error::Kind kind, const std::string& message, bool backoff) {
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

void Client::Impl::tick() {
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

void Client::Impl::expire(Conn& c, Clock::time_point now) {
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
        return fail_conn(c, Error::Kind::kTimeout,
                         "no answer " + where + " within " + std::to_string(options.command_timeout.count()) + " ms",
                         true);
      }
      if (!p.internal) expire(p, where);
    }
    first = first && p.internal;
  }
}

}  // namespace rk::store::redis
