// store/redis/script.h: a Lua script run in Redis by its digest (EVALSHA), the digest being the one Redis answers
// to SCRIPT LOAD, which the client sends at the handshake of every connection (client.h): no round trip of its own,
// and nothing hashed here.
//
//   rk::redis::Script script(client, "return redis.call('INCR', KEYS[1])");
//   script.eval({"k"}, {}, [](rk::redis::Result r) { ... });  // EVALSHA; EVAL until a digest is known, and once
//                                                              // after a NOSCRIPT (which also loads it again)
//
// Thread safety: eval() from any thread; the digest is learnt on the client's thread. The script must not outlive
// its client.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/redis/client.h"

namespace rk::redis {

class Script {
 public:
  Script(Client& client, std::string source);
  const std::string& source() const { return state_->source; }
  std::string digest() const;  // SHA-1 in hex, as Redis answered it; empty until then
  // EVALSHA digest numkeys keys... args... (EVAL source ... while the digest is unknown); on NOSCRIPT, EVAL once,
  // within the first command's deadline. Routed by keys[0].
  void eval(std::vector<std::string> keys, std::vector<std::string> args, std::function<void(Result)> done) const;

 private:
  // Shared with the client's SCRIPT LOAD callbacks. The digest is written once (every answer is the same: the SHA-1
  // of the source), then only read: `known` says when it may be read without the lock.
  struct State {
    std::string source;
    std::mutex mu;
    std::string digest;  // under mu until `known`
    std::atomic<bool> known{false};
  };
  Client& client_;
  std::shared_ptr<State> state_;
};

}  // namespace rk::redis
