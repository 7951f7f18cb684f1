// store/redis/script.cc: EVALSHA by the digest Redis answered, EVAL without one (script.h).
#include "store/redis/script.h"

#include <chrono>

namespace rk::redis {

Script::Script(Client& client, std::string source) : client_(client), state_(std::make_shared<State>()) {
  state_->source = std::move(source);
  client_.load_script(state_->source, [state = state_](const std::string& digest) {
    if (state->known.load(std::memory_order_acquire)) return;
    std::lock_guard lock(state->mu);
    state->digest = digest;
    state->known.store(true, std::memory_order_release);
  });
}

std::string Script::digest() const {
  if (state_->known.load(std::memory_order_acquire)) return state_->digest;
  std::lock_guard lock(state_->mu);
  return state_->digest;
}

void Script::eval(std::vector<std::string> keys, std::vector<std::string> args,
                  std::function<void(Result)> done) const {
  const bool known = state_->known.load(std::memory_order_acquire);
  std::vector<std::string> cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.push_back(known ? "EVALSHA" : "EVAL");
  cmd.push_back(known ? state_->digest : state_->source);
  cmd.push_back(std::to_string(keys.size()));
  const std::string routing = keys.empty() ? std::string() : keys[0];
  for (auto& k : keys) cmd.push_back(std::move(k));
  for (auto& a : args) cmd.push_back(std::move(a));
  // One deadline for both: loading the script is part of the command's exchange, not a second timeout.
  const Client::Deadline deadline = std::chrono::steady_clock::now() + client_.command_timeout();
  if (!known) return client_.exec(std::move(cmd), routing, std::move(done), deadline);
  Client* c = &client_;
  client_.exec(cmd, routing, [c, state = state_, cmd, routing, deadline, done = std::move(done)](Result r) mutable {
    const auto* e = std::get_if<Error>(&r);
    if (!e || e->kind != Error::Kind::kServer || !e->message.starts_with("NOSCRIPT")) return done(std::move(r));
    cmd[0] = "EVAL";  // also loads the script again: the next EVALSHA finds it
    cmd[1] = state->source;
    c->exec(std::move(cmd), routing, std::move(done), deadline);
  }, deadline);
}

}  // namespace rk::redis
