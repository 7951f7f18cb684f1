// server/serve/state_file.h: `serve --state-file`: the in-process store's keys and states, per rule, kept across
// restarts.
//
//   StateSaver saver(path, reloader, keep, clock, std::chrono::seconds(30));   // restores now, then saves every 30 s
//   ...
//   saver.stop();                                                              // at shutdown: saves once more
//
// The file (version 1, little-endian, core/state_codec.h's integers):
//   "rkstate\0"  u32 version  i64 saved_at_ns  u32 rules
//   per rule:    u32 length, the rule's identity (rules/ruleset.h)   u64 keys
//   per key:     u32 length, the stored key   u32 length, the state (core/state_codec.h)
//   u32 CRC-32C of every byte before it
// A rule's states come back only into a rule of the same identity, the one live reload keeps a limiter by, so a
// changed limit, algorithm or descriptor starts fresh. The states hold times of the service's clock (SystemClock:
// wall time since the Unix epoch), so the time the server was down counts as time passed for every algorithm.
// A file that is truncated, damaged, foreign or of another version is refused whole before anything is restored:
// the server logs it and starts fresh.
//
// Thread safety: saves run on the saver's thread, and once more in stop(); a save copies one key's state at a time
// under that key's lock (ShardedStore::for_each), so decisions go on while it runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "base/periodic.h"
#include "ratekeeper/clock.h"
#include "rules/reloader.h"
#include "rules/ruleset.h"

namespace rk::serve {

// Which rules' limiters are saved and restored (not those of domains decided in Redis).
using KeepRule = std::function<bool(const rules::RuleSet&, const rules::Rule&)>;

struct StateCounts {
  std::size_t rules = 0;          // rules saved or restored
  std::size_t keys = 0;
  std::size_t skipped_rules = 0;  // restore: rules of the file that no rule of the same identity wants
  std::int64_t saved_at_ns = 0;
};

// The file's bytes for the rules `keep` selects.
std::string encode_state_file(const rules::RuleSet& set, const KeepRule& keep, Nanos saved_at, StateCounts& counts);

// Checks the whole file, then puts its states into the limiters of the rules of the same identity. Returns what it
// restored, or why it refused the file (nothing restored then).
std::variant<StateCounts, std::string> restore_state_file(std::string_view bytes, const rules::RuleSet& set,
                                                          const KeepRule& keep);

// Replaces `path` with `bytes` whole or not at all: a temporary file in the same directory, fsync, rename, fsync of
// the directory. Returns the error, or "".
std::string write_file_atomically(const std::string& path, std::string_view bytes);

// The file's bytes into `bytes`: "" if read, else why not ("missing" alone when there is no such file).
std::string read_state_file(const std::string& path, std::string& bytes);

// Why `path` cannot be a state file (its directory missing or not writable, or it is a directory), or "".
std::string check_state_path(const std::string& path);

class StateSaver {
 public:
  // Restores from `path` (a missing file: nothing to restore), then saves every `interval`. Logs what it does.
  StateSaver(std::string path, const rules::Reloader& reloader, KeepRule keep, std::shared_ptr<const Clock> clock,
             Nanos interval);
  ~StateSaver();
  // Stops the periodic saves and saves once more; idempotent. Returns whether that last save succeeded.
  bool stop();
  bool save_now(bool loud = false);  // loud: logged at info (the last save), not debug

 private:
  std::string path_;
  const rules::Reloader& reloader_;
  KeepRule keep_;
  std::shared_ptr<const Clock> clock_;
  base::Periodic periodic_;
  bool stopped_ = false;
};

}  // namespace rk::serve
