// store/redis/lua_script.cc: FCALL of a loaded function, EVALSHA by the digest Redis answered, EVAL without either
// (lua_script.h).
#include "store/redis/lua_script.h"

#include <chrono>

namespace rk::store::redis {

namespace {

// Redis keeps one library of a name, so an answer that it has this one already means it is loaded.
bool library_loaded(const Reply& r) {
  return r.type != Reply::Type::kError || r.str.find("already exists") != std::string::npos;
}

// The errors after which the call is made again by EVAL: the script or function is not (or no longer) in Redis,
// or this user may not call functions.
bool not_there(const std::string& message, bool function) {
  if (message.starts_with("NOSCRIPT")) return true;
  if (!function) return false;
  return message.starts_with("ERR Function not found") || message.starts_with("NOPERM") ||
         message.starts_with("ERR unknown command");
}

}  // namespace

Script::Script(Client& client, std::string source, FunctionSource function)
    : client_(client), state_(std::make_shared<State>()) {
  state_->source = std::move(source);
  state_->function = std::move(function);
  client_.on_every_connection({"SCRIPT", "LOAD", state_->source}, [state = state_](const Reply& r) {
    if (r.type != Reply::Type::kBulk || state->known.load(std::memory_order_acquire)) return;
    std::lock_guard lock(state->mu);
    state->digest = r.str;
    state->known.store(true, std::memory_order_release);
  });
  if (state_->function.name.empty()) return;
  client_.on_every_connection({"FUNCTION", "LOAD", state_->function.library}, [state = state_](const Reply& r) {
    if (library_loaded(r)) state->function_loaded.store(true, std::memory_order_release);
  });
}

std::string Script::digest() const {
  if (state_->known.load(std::memory_order_acquire)) return state_->digest;
  std::lock_guard lock(state_->mu);
  return state_->digest;
}

void Script::eval(std::vector<std::string> keys, std::vector<std::string> args,
                  std::function<void(Result)> done) const {
  const bool function = state_->function_loaded.load(std::memory_order_acquire);
  const bool known = function || state_->known.load(std::memory_order_acquire);
  std::vector<std::string> cmd;
  cmd.reserve(3 + keys.size() + args.size());
  if (function) {
    cmd.push_back("FCALL");
    cmd.push_back(state_->function.name);
  } else {
    cmd.push_back(known ? "EVALSHA" : "EVAL");
    cmd.push_back(known ? state_->digest : state_->source);
  }
  cmd.push_back(std::to_string(keys.size()));
  const std::string routing = keys.empty() ? std::string() : keys[0];
  for (auto& k : keys) cmd.push_back(std::move(k));
  for (auto& a : args) cmd.push_back(std::move(a));
  // One deadline for both: loading the script is part of the command's exchange, not a second timeout.
  const Client::Deadline deadline = std::chrono::steady_clock::now() + client_.command_timeout();
  if (!known) return client_.exec(std::move(cmd), routing, std::move(done), deadline);
  Client* c = &client_;
  client_.exec(
      cmd, routing,
      [c, state = state_, function, cmd, routing, deadline, done = std::move(done)](Result r) mutable {
        const auto* e = std::get_if<Error>(&r);
        if (!e || e->kind != Error::Kind::kServer || !not_there(e->message, function)) return done(std::move(r));
        if (function && e->message.starts_with("ERR Function not found")) {
          // Lost (FUNCTION FLUSH, say): loaded again for the calls to come, ahead of them on the key's connection.
          c->exec(
              {"FUNCTION", "LOAD", state->function.library}, routing, [](Result) {}, deadline);
        } else if (function) {
          state->function_loaded.store(false, std::memory_order_release);  // this user or server has no functions
        }
        cmd[0] = "EVAL";  // also loads the script again: the next EVALSHA finds it
        cmd[1] = state->source;
        c->exec(std::move(cmd), routing, std::move(done), deadline);
      },
      deadline);
}

}  // namespace rk::store::redis
