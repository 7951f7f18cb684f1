// cli/serve/state_file.h: `serve --state-file`: the in-process store's keys and states, per rule, kept across
// restarts.
//
//   StateSaver saver(path, reloader, keep, clock, std::chrono::seconds(30), key);  // restores, then saves every 30 s
//   ...
//   saver.stop();                                                                  // at shutdown: saves once more
//
// The file (version 3, little-endian, core/state_codec.h's integers):
//   "rkstate\0"  u32 version  u32 mac (version 3 on: 0 none, 1 HMAC-SHA256)  i64 saved_at_ns  u32 rules
//   per rule:    u32 length, the rule's identity (rules/ruleset.h)   u64 keys
//   per key:     u32 length, the stored key   u32 length, the state (core/state_codec.h)
//   u32 CRC-32C of every byte before it
//   with mac 1:  32 bytes, HMAC-SHA256 under the key (--state-file-key-file) of every byte before them
// A rule's states come back only into a rule of the same identity, the one live reload keeps a limiter by, so a
// changed limit, algorithm or descriptor starts fresh. The states hold times of the service's clock (SystemClock:
// wall time since the Unix epoch), so the time the server was down counts as time passed for every algorithm.
//
// What is believed. A file that is truncated, damaged, foreign or of another version is refused whole before anything
// is restored: the server logs it and starts fresh. The CRC finds damage (a torn write, a flipped bit), not forgery:
// anyone who can write the file can compute it. So the file is read only if store/file/trust.h believes it (not a
// symbolic link, a regular file of this process's uid that group and others cannot write), only up to what the
// configured stores can hold (max_state_file_bytes(), checked before anything is allocated), and, with a key, only
// if its MAC is the key's. A file refused for any reason is replaced at the next save: a new file of this uid, mode
// 0600, renamed over it.
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
#include "base/secret_file.h"
#include "ratekeeper/clock.h"
#include "rules/reloader.h"
#include "rules/ruleset.h"

namespace rk::cli::serve {

// Which rules' limiters are saved and restored (not those of domains decided in Redis).
using KeepRule = std::function<bool(const rules::RuleSet&, const rules::Rule&)>;

struct StateCounts {
  std::size_t rules = 0;  // rules saved or restored
  std::size_t keys = 0;
  std::size_t skipped_rules = 0;  // restore: rules of the file that no rule of the same identity wants
  std::int64_t saved_at_ns = 0;
};

// A --state-file-key-file's least length: HMAC-SHA256's own output length (RFC 2104: shorter keys weaken it).
inline constexpr std::size_t kMinStateKeyBytes = 32;

// The file's bytes for the rules `keep` selects; with `mac_key` (not empty) followed by their HMAC-SHA256 under it.
// Throws std::runtime_error if OpenSSL cannot compute the MAC.
std::string encode_state_file(const rules::RuleSet& set, const KeepRule& keep, Nanos saved_at, StateCounts& counts,
                              std::string_view mac_key = {});

// Checks the whole file, then puts its states into the limiters of the rules of the same identity. Returns what it
// restored, or why it refused the file (nothing restored then). With `mac_key` only a file whose MAC is that key's
// is taken; without, only a file without a MAC.
std::variant<StateCounts, std::string> restore_state_file(std::string_view bytes, const rules::RuleSet& set,
                                                          const KeepRule& keep, std::string_view mac_key = {});

// The largest file the rules `keep` selects could have written: each one's store full (StoreStats::max_keys, which
// --max-keys and --max-memory set), every key at its longest stored form with its algorithm's largest state, and
// room for each rule's identity. A larger file was not written by these stores: read_state_file refuses it unread.
std::uint64_t max_state_file_bytes(const rules::RuleSet& set, const KeepRule& keep);

// Replaces `path` with `bytes` whole or not at all: a temporary file in the same directory, fsync, rename, fsync of
// the directory. Returns the error, or "".
std::string write_file_atomically(const std::string& path, std::string_view bytes);

// The file's bytes into `bytes`: "" if read, else why not ("missing" alone when there is no such file). A file
// store/file/trust.h does not believe, or of more than `max_bytes`, is refused before anything is allocated for it;
// what is read is never more than `max_bytes`, whatever the file's size said.
std::string read_state_file(const std::string& path, std::uint64_t max_bytes, std::string& bytes);

// --state-file-key-file's key, read again when the file is rotated (base/secret_file.h). Throws
// std::invalid_argument naming the flag for a file that cannot be read or holds fewer than kMinStateKeyBytes bytes.
std::shared_ptr<base::SecretFile> read_state_key(const std::string& key_file);

// Why `path` cannot be a state file (its directory missing or not writable, or it is a directory), or "".
std::string check_state_path(const std::string& path);

class StateSaver {
 public:
  // Restores from `path` (a missing file: nothing to restore), then saves every `interval`. Logs what it does. With
  // `key`, the file is read only with a MAC under its key, and written with one under its key as of each save.
  StateSaver(std::string path, const rules::Reloader& reloader, KeepRule keep, std::shared_ptr<const Clock> clock,
             Nanos interval, std::shared_ptr<base::SecretFile> key = nullptr);
  ~StateSaver();
  // Stops the periodic saves and saves once more; idempotent. Returns whether that last save succeeded.
  bool stop();
  bool save_now(bool loud = false);  // loud: logged at info (the last save), not debug

 private:
  void restore(const rules::RuleSet& set);

  std::string path_;
  const rules::Reloader& reloader_;
  KeepRule keep_;
  std::shared_ptr<const Clock> clock_;
  std::shared_ptr<base::SecretFile> key_;  // null: no MAC
  base::Periodic periodic_;
  bool stopped_ = false;
};

}  // namespace rk::cli::serve
