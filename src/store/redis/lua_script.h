// store/redis/lua_script.h: a Lua script run in Redis, as a function (FCALL) where Redis has them (7.0 on) and by its
// digest (EVALSHA) elsewhere. Both are loaded in the handshake of every connection (client.h): no round trip of
// their own, and nothing hashed here.
//
//   rk::store::redis::Script script(client, "return redis.call('INCR', KEYS[1])");
//   script.eval({"k"}, {}, [](rk::store::redis::Result r) { ... });  // EVALSHA; EVAL until a digest is known, and once
//                                                              // after a NOSCRIPT (which also loads it again)
//   rk::store::redis::Script fn(client, source, {.library = "#!lua name=f_1\n...", .name = "f_1"});
//   fn.eval(...);  // FCALL f_1 once Redis said it loaded the library; else as above
//
// A function runs without making the script's functions and closures again at each call, which cost an EVAL
// script about a fifth of Redis's CPU time a decision (bench/RESULTS.md, "the scripts as Redis functions"). Where
// FUNCTION LOAD is refused (Redis before 7.0, an ACL), the script runs by EVALSHA, answering the same. A function
// Redis has lost (FUNCTION FLUSH; a replica promoted before the library reached it) costs the call an EVAL, and its
// library is loaded again on that connection.
//
// Thread safety: eval() from any thread; what Redis answers is learnt on the client's thread. The script must not
// outlive its client.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/redis/client.h"

namespace rk::store::redis {

// A library for FUNCTION LOAD registering one function, `name`, that takes the same KEYS and ARGV as the script
// and answers the same. `name` must change whenever the text does: Redis keeps one library of a name.
struct FunctionSource {
  std::string library;
  std::string name;
};

class Script {
 public:
  Script(Client& client, std::string source, FunctionSource function = {});
  const std::string& source() const { return state_->source; }
  std::string digest() const;  // SHA-1 in hex, as Redis answered it; empty until then
  bool by_function() const { return state_->function_loaded.load(std::memory_order_acquire); }
  // FCALL name numkeys keys... args... once the function is loaded; else EVALSHA digest ... (EVAL source ... while
  // the digest is unknown); on NOSCRIPT or a function not found, EVAL once, within the first command's deadline.
  // Routed by keys[0].
  void eval(std::vector<std::string> keys, std::vector<std::string> args, std::function<void(Result)> done) const;

 private:
  // Shared with the client's callbacks. The digest is written once (every answer is the same: the SHA-1 of the
  // source), then only read: `known` says when it may be read without the lock.
  struct State {
    std::string source;
    FunctionSource function;
    std::mutex mu;
    std::string digest;  // under mu until `known`
    std::atomic<bool> known{false};
    std::atomic<bool> function_loaded{false};
  };
  Client& client_;
  std::shared_ptr<State> state_;
};

}  // namespace rk::store::redis
