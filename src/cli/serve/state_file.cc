// cli/serve/state_file.cc: the state file's format, its atomic write, and the saver.
#include "cli/serve/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/crc32c.h"
#include "core/state_codec.h"
#include "library/limiter_states.h"
#include "logging/log.h"
#include "store/file/trust.h"

namespace rk::cli::serve {

namespace {

constexpr std::string_view kMagic{"rkstate\0", 8};
// 2: a sliding window's state in 16 bytes (core/windows.h). A version-1 file is read with its sliding_window rules
// skipped (their 24-byte states have no meaning now); every other rule's states come back.
// 3: the header's MAC kind, and the MAC after the CRC when there is one.
constexpr std::uint32_t kVersion = 3;
constexpr std::uint32_t kOldestVersion = 1;
constexpr std::uint32_t kNoMac = 0, kHmacSha256 = 1;
constexpr std::size_t kTagBytes = 32;
// Bytes of the header (magic, version, MAC kind, time, rule count) and of the CRC.
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4, kCrcBytes = 4;
// What a rule of the file takes besides its keys: its identity's length and key count, and its identity, which may
// be a rule whose identity changed since (its keys are skipped), so not the length of any rule's here.
constexpr std::uint64_t kRuleAllowance = 4 + 8 + 64 * 1024;

// The file's permission bits beyond the owner's that are believed: reading (it was written 0600; someone chose to
// let others read it). Writing is not: whoever may write it decides every limit in it.
constexpr unsigned kAllowedMode = 0644;

// HMAC-SHA256 of `data` under `key`; "" if OpenSSL could not compute it.
std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char tag[kTagBytes];
  std::size_t n = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                reinterpret_cast<const unsigned char*>(data.data()), data.size(), tag, sizeof tag, &n) == nullptr ||
      n != kTagBytes) {
    return "";
  }
  return {reinterpret_cast<const char*>(tag), kTagBytes};
}

void put_bytes(std::string_view s, std::string& out) {
  core::put_u32(static_cast<std::uint32_t>(s.size()), out);
  out += s;
}

// A length is believed only up to the bytes left: nothing is ever allocated, or looped over, by a count of the
// file's alone (a rule's key count ends with the bytes too).
bool get_bytes(std::string_view& in, std::string_view& s) {
  std::uint32_t n;
  if (!core::get_u32(in, n) || n > in.size()) return false;
  s = in.substr(0, n);
  in.remove_prefix(n);
  return true;
}

// The rules a file's states may go to: by identity, those `keep` selects.
std::unordered_map<std::string_view, Limiter*> limiters_by_identity(const rules::RuleSet& set, const KeepRule& keep) {
  std::unordered_map<std::string_view, Limiter*> out;
  for (const auto& r : set.rules()) {
    if (r->limiter && keep(set, *r)) out.emplace(r->identity, r->limiter.get());
  }
  return out;
}

// Walks the rules of a checked file's body; `apply` false only checks every state. Returns "" or the problem.
std::string walk(std::string_view body, std::uint32_t version, std::uint32_t rule_count,
                 const std::unordered_map<std::string_view, Limiter*>& limiters, bool apply, StateCounts& counts) {
  for (std::uint32_t r = 0; r < rule_count; ++r) {
    std::string_view identity;
    std::uint64_t keys;
    if (!get_bytes(body, identity) || !core::get_u64(body, keys)) return "rule " + std::to_string(r) + " is cut short";
    const auto it = limiters.find(identity);
    Limiter* limiter = it == limiters.end() ? nullptr : it->second;
    if (limiter && version < 2 && limiter->spec().algorithm == Algorithm::kSlidingWindow) limiter = nullptr;
    for (std::uint64_t k = 0; k < keys; ++k) {
      std::string_view key, state;
      if (!get_bytes(body, key) || !get_bytes(body, state)) return "rule " + std::to_string(r) + " is cut short";
      if (!limiter) continue;
      if (apply) {
        library::import_state(*limiter, key, state);
      } else if (!library::state_valid(*limiter, key, state)) {
        return "rule " + std::to_string(r) + " holds a state its algorithm cannot have";
      }
    }
    if (limiter) {
      ++counts.rules;
      counts.keys += keys;
    } else {
      ++counts.skipped_rules;
    }
  }
  if (!body.empty()) return "bytes after the last rule";
  return "";
}

}  // namespace

std::string encode_state_file(const rules::RuleSet& set, const KeepRule& keep, Nanos saved_at, StateCounts& counts,
                              std::string_view mac_key) {
  counts = StateCounts{.saved_at_ns = saved_at.count()};
  // The states are appended under their keys' locks: into chunks of bounded size, so that no append ever copies
  // the whole file so far (a growing string's reallocation) while a key and its shard wait.
  constexpr std::size_t kChunkBytes = 1 << 20;
  std::vector<std::string> chunks(1);
  const auto next_chunk = [&] {
    chunks.emplace_back();
    chunks.back().reserve(kChunkBytes + 4096);
  };
  chunks.back() = kMagic;
  core::put_u32(kVersion, chunks.back());
  core::put_u32(mac_key.empty() ? kNoMac : kHmacSha256, chunks.back());
  core::put_u64(static_cast<std::uint64_t>(saved_at.count()), chunks.back());
  core::put_u32(0, chunks.back());                              // the rule count, written below
  std::vector<std::pair<std::size_t, std::size_t>> key_counts;  // (chunk, offset) of each rule's key count
  for (const auto& r : set.rules()) {
    if (!r->limiter || !keep(set, *r)) continue;
    next_chunk();
    put_bytes(r->identity, chunks.back());
    key_counts.emplace_back(chunks.size() - 1, chunks.back().size());
    core::put_u64(0, chunks.back());
    std::uint64_t keys = 0;
    library::export_states(*r->limiter, [&](std::string_view key, std::string_view state) {
      if (chunks.back().size() >= kChunkBytes) next_chunk();
      put_bytes(key, chunks.back());
      put_bytes(state, chunks.back());
      ++keys;
    });
    std::string count;
    core::put_u64(keys, count);
    chunks[key_counts.back().first].replace(key_counts.back().second, count.size(), count);
    ++counts.rules;
    counts.keys += keys;
  }
  std::string rule_count;
  core::put_u32(static_cast<std::uint32_t>(counts.rules), rule_count);
  chunks[0].replace(kHeaderBytes - 4, rule_count.size(), rule_count);
  std::size_t total = kCrcBytes + (mac_key.empty() ? 0 : kTagBytes);
  for (const std::string& c : chunks) total += c.size();
  std::string out;
  out.reserve(total);
  for (std::string& c : chunks) {
    out += c;
    std::string().swap(c);
  }
  core::put_u32(base::crc32c(out), out);
  if (!mac_key.empty()) {
    const std::string tag = hmac_sha256(mac_key, out);
    if (tag.empty()) throw std::runtime_error("OpenSSL could not compute the state file's HMAC-SHA256");
    out += tag;
  }
  return out;
}

std::variant<StateCounts, std::string> restore_state_file(std::string_view bytes, const rules::RuleSet& set,
                                                          const KeepRule& keep, std::string_view mac_key) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) return "not a ratekeeper state file";
  std::string_view in = bytes.substr(kMagic.size());
  std::uint32_t version, mac = kNoMac;
  if (!core::get_u32(in, version)) return "cut short in its header";
  if (version < kOldestVersion || version > kVersion) {
    return "version " + std::to_string(version) + ", this ratekeeper reads versions " + std::to_string(kOldestVersion) +
           " to " + std::to_string(kVersion);
  }
  if (version >= 3 && !core::get_u32(in, mac)) return "cut short in its header";
  if (mac != kNoMac && mac != kHmacSha256) return "of MAC kind " + std::to_string(mac) + ", which is none known";
  if (mac == kNoMac && !mac_key.empty()) {
    return "without a MAC, and --state-file-key-file is set: anyone who could write the file could have made it";
  }
  if (mac == kHmacSha256 && mac_key.empty()) return "with a MAC, and no --state-file-key-file is set to check it";
  const std::size_t tag_bytes = mac == kHmacSha256 ? kTagBytes : 0;
  if (in.size() < 8 + 4 + kCrcBytes + tag_bytes) return "cut short in its header";
  // The MAC first: until it matches, nothing of the file is believed, its CRC included.
  const std::string_view checked = bytes.substr(0, bytes.size() - tag_bytes);
  if (tag_bytes != 0) {
    const std::string tag = hmac_sha256(mac_key, checked);
    if (tag.size() != kTagBytes || CRYPTO_memcmp(tag.data(), bytes.data() + checked.size(), kTagBytes) != 0) {
      return "its MAC is not the one --state-file-key-file's key gives (written under another key, or forged)";
    }
  }
  std::string_view tail = checked.substr(checked.size() - kCrcBytes);
  std::uint32_t sum;
  core::get_u32(tail, sum);
  if (base::crc32c(checked.substr(0, checked.size() - kCrcBytes)) != sum) {
    return "damaged or cut short (checksum mismatch)";
  }
  in.remove_suffix(kCrcBytes + tag_bytes);
  StateCounts counts;
  std::uint64_t saved_at;
  std::uint32_t rule_count;
  core::get_u64(in, saved_at);
  core::get_u32(in, rule_count);
  counts.saved_at_ns = static_cast<std::int64_t>(saved_at);
  const auto limiters = limiters_by_identity(set, keep);
  // Every state checked before any is restored: a file is taken whole or not at all.
  if (std::string e = walk(in, version, rule_count, limiters, false, counts); !e.empty()) return e;
  counts = StateCounts{.saved_at_ns = counts.saved_at_ns};
  walk(in, version, rule_count, limiters, true, counts);
  return counts;
}

std::string write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return "cannot create a temporary file next to " + path + ": " + std::strerror(errno);
  std::string error;
  for (std::size_t done = 0; done < bytes.size() && error.empty();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = std::string("cannot write ") + tmp + ": " + std::strerror(errno);
    else done += static_cast<std::size_t>(n);
  }
  if (error.empty() && ::fsync(fd) != 0) error = std::string("cannot fsync ") + tmp + ": " + std::strerror(errno);
  if (::close(fd) != 0 && error.empty()) error = std::string("cannot close ") + tmp + ": " + std::strerror(errno);
  if (error.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(err);
    struct stat st;
    if ((err == EPERM || err == EACCES) && ::lstat(path.c_str(), &st) == 0 && st.st_uid != ::geteuid()) {
      error += " (" + path + " belongs to uid " + std::to_string(st.st_uid) + ", and in a directory with the " +
               "sticky bit, such as /tmp, only its owner may replace it: remove it, or keep the state file in a " +
               "directory only this user can write)";
    }
  }
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    return error;
  }
  // The rename is durable once the directory is.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || ::fsync(dfd) != 0) error = "cannot fsync the directory " + dir + ": " + std::strerror(errno);
  if (dfd >= 0) ::close(dfd);
  return error;
}

std::uint64_t max_state_file_bytes(const rules::RuleSet& set, const KeepRule& keep) {
  // Saturating: a bound past what any file system holds is no bound, not a wrapped small one.
  const auto add = [](std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  std::uint64_t bytes = kHeaderBytes + kCrcBytes + kTagBytes;
  for (const auto& r : set.rules()) {
    if (!r->limiter || !keep(set, *r)) continue;
    const LimitSpec& spec = r->limiter->spec();
    const std::uint64_t per_key =
        4 + library::kMaxStoredKeyBytes + 4 + core::max_encoded_bytes(spec.algorithm, spec.limit);
    const std::uint64_t keys = r->limiter->stats().max_keys;
    bytes = add(bytes, add(kRuleAllowance, keys > UINT64_MAX / per_key ? UINT64_MAX : keys * per_key));
  }
  return bytes;
}

std::string read_state_file(const std::string& path, std::uint64_t max_bytes, std::string& bytes) {
  bytes.clear();
  const store::file::TrustedFile f = store::file::open_trusted(path, O_RDONLY, kAllowedMode, "a state file may have");
  if (!f.refused.empty()) return f.refused;
  if (f.fd < 0) return f.error == ENOENT ? "missing" : "cannot open " + path + ": " + std::strerror(f.error);
  const auto too_large = [&](std::uint64_t size) {
    return path + " is " + std::to_string(size) + " bytes or more, and the configured stores (--max-keys, " +
           "--max-memory) write at most " + std::to_string(max_bytes) + "; refused unread";
  };
  std::string error;
  const auto size = static_cast<std::uint64_t>(f.st.st_size);
  if (size > max_bytes) error = too_large(size);
  // Read in pieces up to what was checked: the file may have grown since fstat, and no more than max_bytes is read.
  try {
    std::string piece(std::min<std::uint64_t>(max_bytes, 1 << 20) + 1, '\0');
    if (error.empty()) bytes.reserve(static_cast<std::size_t>(size));
    while (error.empty()) {
      const ssize_t n = ::read(f.fd, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = "cannot read " + path + ": " + std::strerror(errno);
      else if (n == 0) break;
      else if (bytes.size() + static_cast<std::size_t>(n) > max_bytes) error = too_large(bytes.size() + n);
      else bytes.append(piece.data(), static_cast<std::size_t>(n));
    }
  } catch (const std::bad_alloc&) {
    error = "cannot hold " + path + " (" + std::to_string(size) + " bytes) in memory";
  }
  ::close(f.fd);
  if (!error.empty()) std::string().swap(bytes);
  return error;
}

std::shared_ptr<base::SecretFile> read_state_key(const std::string& key_file) {
  return std::make_shared<base::SecretFile>("--state-file-key-file", key_file, base::SecretFile::kAnyBytes,
                                            kMinStateKeyBytes);
}

std::string check_state_path(const std::string& path) {
  if (path.empty() || path.back() == '/') return "'" + path + "' is not a file name";
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return "the directory of '" + path + "' (" + dir + ") does not exist";
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return "the directory of '" + path + "' (" + dir + ") is not writable: " + std::strerror(errno);
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return "'" + path + "' is not a regular file";
  return "";
}

StateSaver::StateSaver(std::string path, const rules::Reloader& reloader, KeepRule keep,
                       std::shared_ptr<const Clock> clock, Nanos interval, std::shared_ptr<base::SecretFile> key)
    : path_(std::move(path)),
      reloader_(reloader),
      keep_(std::move(keep)),
      clock_(std::move(clock)),
      key_(std::move(key)) {
  if (const auto set = reloader_.current()) restore(*set);
  periodic_.start(interval, [this] { save_now(); });
}

void StateSaver::restore(const rules::RuleSet& set) {
  const auto started = std::chrono::steady_clock::now();
  std::string bytes;
  std::string error = read_state_file(path_, max_state_file_bytes(set, keep_), bytes);
  if (error == "missing") {
    logging::log(logging::Level::kInfo, "no state file yet, starting fresh", {{"file", path_}});
    return;
  }
  if (error.empty()) {
    const auto key = key_ ? key_->current() : nullptr;
    auto result = restore_state_file(bytes, set, keep_, key ? std::string_view(*key) : std::string_view());
    if (auto* e = std::get_if<std::string>(&result)) {
      error = std::move(*e);
    } else {
      const auto& c = std::get<StateCounts>(result);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
      const double age_s = to_seconds(clock_->now() - Nanos{c.saved_at_ns});
      logging::log(logging::Level::kInfo, "state restored",
                   {{"file", path_},
                    {"rules", std::to_string(c.rules)},
                    {"keys", std::to_string(c.keys)},
                    {"rules_changed", std::to_string(c.skipped_rules)},
                    {"age_s", std::to_string(age_s)},
                    {"ms", std::to_string(ms)}});
      return;
    }
  }
  // Nothing of it restored; the first save replaces it with a file of this uid, mode 0600 (write_file_atomically).
  logging::log(logging::Level::kError, "state file ignored, starting fresh",
               {{"file", path_}, {"error", error}, {"then", "the next save replaces it"}});
}

StateSaver::~StateSaver() { stop(); }

bool StateSaver::stop() {
  if (stopped_) return true;
  stopped_ = true;
  periodic_.stop();
  return save_now(true);
}

bool StateSaver::save_now(bool loud) {
  const auto set = reloader_.current();
  if (!set) return false;
  const auto started = std::chrono::steady_clock::now();
  StateCounts counts;
  std::string bytes, error;
  try {
    const auto key = key_ ? key_->current() : nullptr;
    bytes = encode_state_file(*set, keep_, clock_->now(), counts, key ? std::string_view(*key) : std::string_view());
    error = write_file_atomically(path_, bytes);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    logging::log(logging::Level::kError, "state not saved", {{"file", path_}, {"error", error}});
    return false;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  logging::log(loud ? logging::Level::kInfo : logging::Level::kDebug, "state saved",
               {{"file", path_},
                {"rules", std::to_string(counts.rules)},
                {"keys", std::to_string(counts.keys)},
                {"bytes", std::to_string(bytes.size())},
                {"ms", std::to_string(ms)}});
  return true;
}

}  // namespace rk::cli::serve
