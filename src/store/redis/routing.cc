// store/redis/routing.cc: where each of the Redis client's commands goes (client_impl.h): the one node, a
// Sentinel's primary (asked of the sentinels at each connection: sentinel.cc), or a Cluster's node for the key's
// slot (cluster.cc), with MOVED and ASK followed up to kMaxRedirects times and the slot map refreshed from
// CLUSTER SLOTS.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "store/redis/client_impl.h"

namespace rk::store::redis {

namespace {

constexpr int kMaxRedirects = 5;

}  // namespace

Client::Impl::Node& Client::Impl::node_for(const Endpoint& e) {
  auto& n = nodes[endpoint_text(e)];
  if (!n) {
    n = std::make_unique<Node>();
    n->endpoint = e;
    for (int i = 0; i < options.connections_per_node; ++i) n->conns.push_back(std::make_unique<Conn>(*n));
  }
  return *n;
}

Client::Impl::Node& Client::Impl::route(const std::string& key) {
  switch (options.mode) {
    case ClientOptions::Mode::kSingle: return node_for(options.endpoints[0]);
    case ClientOptions::Mode::kSentinel: return *sentinel_node;
    case ClientOptions::Mode::kCluster: break;
  }
  if (Node* n = slots[key_slot(key)]) return *n;
  return node_for(options.endpoints[seed_turn % options.endpoints.size()]);
}

void Client::Impl::dispatch(Pending p) {
  if (closed) return finish(p, Error{Error::Kind::kClosed, "the Redis client is closed"});
  Node& node = route(p.key);  // before p is moved from: argument order is unspecified
  send_to(node, std::move(p), false);
}

// Sentinel: the primary's address is asked of the sentinels (sentinel.h). Nothing blocks: the commands waiting
// meanwhile are answered at their own deadlines by tick().
void Client::Impl::discover(Conn& c) {
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

void Client::Impl::found_primary(Conn& c, const Endpoint& primary) {
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

// A redirect is followed (if the command is not answered already: timed out); any other error is the caller's.
// False if the connection was failed.
bool Client::Impl::on_error(Conn& c, Pending p, std::string error) {
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

// CLUSTER SLOTS from any node that answers; the map is replaced whole.
void Client::Impl::refresh_slots() {
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

}  // namespace rk::store::redis
