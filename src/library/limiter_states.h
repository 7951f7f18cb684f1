// library/limiter_states.h: a Limiter's tracked keys and their states out and back in, for `serve --state-file`
// (cli/serve/state_file.h). Internal: not installed, not exported from the shared library.
//
//   rk::library::export_states(limiter, [&](std::string_view key, std::string_view state) { save(key, state); });
//   ...
//   if (!rk::library::import_state(limiter, key, state)) ...   // malformed: nothing changed
//
// Keys are in their stored form: a key longer than 64 bytes is stored as a digest under a per-process secret, so
// after a restart no request maps to it again (it is forgotten like any idle key). States are in
// core/state_codec.h's encoding of the limiter's algorithm; they hold times of the limiter's clock.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "ratekeeper/limiter.h"

namespace rk::library {

// Keys up to this length are stored as they are; longer ones as their 16-byte digest. So no stored key, and no key
// export_states gives or import_state takes, is longer.
inline constexpr std::size_t kMaxStoredKeyBytes = 64;

using StateVisitor = std::function<void(std::string_view key, std::string_view state)>;

// Calls f for every tracked key, one key at a time under its lock (decisions on other keys go on); f must not call
// back into the limiter.
void export_states(const Limiter& limiter, const StateVisitor& f);

// Puts `state` for `key`, replacing what the limiter tracks for it. False, and nothing changed, if the key cannot be
// a stored key or the state is not exactly one state of the limiter's algorithm.
bool import_state(Limiter& limiter, std::string_view key, std::string_view state);

// Whether import_state would accept the pair, without changing anything.
bool state_valid(const Limiter& limiter, std::string_view key, std::string_view state);

}  // namespace rk::library
