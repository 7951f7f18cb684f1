// server/serve/state_file.cc: the state file's format, its atomic write, and the saver.
#include "server/serve/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/crc32c.h"
#include "core/state_codec.h"
#include "library/limiter_states.h"
#include "logging/log.h"

namespace rk::serve {

namespace {

constexpr std::string_view kMagic{"rkstate\0", 8};
// 2: a sliding window's state in 16 bytes (core/windows.h). A version-1 file is read with its sliding_window rules
// skipped (their 24-byte states have no meaning now); every other rule's states come back.
constexpr std::uint32_t kVersion = 2;
constexpr std::uint32_t kOldestVersion = 1;

void put_bytes(std::string_view s, std::string& out) {
  core::put_u32(static_cast<std::uint32_t>(s.size()), out);
  out += s;
}

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

std::string encode_state_file(const rules::RuleSet& set, const KeepRule& keep, Nanos saved_at, StateCounts& counts) {
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
  core::put_u64(static_cast<std::uint64_t>(saved_at.count()), chunks.back());
  core::put_u32(0, chunks.back());  // the rule count, written below
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
  chunks[0].replace(kMagic.size() + 4 + 8, rule_count.size(), rule_count);
  std::size_t total = 4;
  for (const std::string& c : chunks) total += c.size();
  std::string out;
  out.reserve(total);
  for (std::string& c : chunks) {
    out += c;
    std::string().swap(c);
  }
  core::put_u32(base::crc32c(out), out);
  return out;
}

std::variant<StateCounts, std::string> restore_state_file(std::string_view bytes, const rules::RuleSet& set,
                                                          const KeepRule& keep) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) return "not a ratekeeper state file";
  std::string_view in = bytes.substr(kMagic.size());
  std::uint32_t version;
  if (!core::get_u32(in, version)) return "cut short in its header";
  if (version < kOldestVersion || version > kVersion) {
    return "version " + std::to_string(version) + ", this ratekeeper reads versions " + std::to_string(kOldestVersion) +
           " to " + std::to_string(kVersion);
  }
  std::string_view tail = bytes.substr(bytes.size() - std::min<std::size_t>(bytes.size(), 4));
  std::uint32_t sum;
  if (in.size() < 4 + 8 + 4 || !core::get_u32(tail, sum)) return "cut short in its header";
  if (base::crc32c(bytes.substr(0, bytes.size() - 4)) != sum) return "damaged or cut short (checksum mismatch)";
  in.remove_suffix(4);
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
    error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
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

std::string read_state_file(const std::string& path, std::string& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? "missing" : "cannot open " + path + ": " + std::strerror(errno);
  struct stat st;
  std::string error;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) error = path + " is not a regular file";
  bytes.clear();
  if (error.empty()) bytes.resize(static_cast<std::size_t>(st.st_size));
  for (std::size_t done = 0; error.empty() && done < bytes.size();) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = "cannot read " + path + ": " + std::strerror(errno);
    else if (n == 0) bytes.resize(done);  // it shrank meanwhile: what there is (the checksum will tell)
    else done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return error;
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
                       std::shared_ptr<const Clock> clock, Nanos interval)
    : path_(std::move(path)), reloader_(reloader), keep_(std::move(keep)), clock_(std::move(clock)) {
  const auto set = reloader_.current();
  std::string bytes;
  const auto started = std::chrono::steady_clock::now();
  const std::string read_error = set ? read_state_file(path_, bytes) : "";
  if (set && !read_error.empty() && read_error != "missing") {
    logging::log(logging::Level::kError, "state file ignored, starting fresh",
                 {{"file", path_}, {"error", read_error}});
  } else if (set && read_error.empty()) {
    const auto result = restore_state_file(bytes, *set, keep_);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    if (const auto* e = std::get_if<std::string>(&result)) {
      logging::log(logging::Level::kError, "state file ignored, starting fresh", {{"file", path_}, {"error", *e}});
    } else {
      const auto& c = std::get<StateCounts>(result);
      const double age_s = to_seconds(clock_->now() - Nanos{c.saved_at_ns});
      logging::log(logging::Level::kInfo, "state restored",
                   {{"file", path_}, {"rules", std::to_string(c.rules)}, {"keys", std::to_string(c.keys)},
                    {"rules_changed", std::to_string(c.skipped_rules)}, {"age_s", std::to_string(age_s)},
                    {"ms", std::to_string(ms)}});
    }
  } else if (set) {
    logging::log(logging::Level::kInfo, "no state file yet, starting fresh", {{"file", path_}});
  }
  std::string().swap(bytes);
  periodic_.start(interval, [this] { save_now(); });
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
  const std::string bytes = encode_state_file(*set, keep_, clock_->now(), counts);
  if (std::string e = write_file_atomically(path_, bytes); !e.empty()) {
    logging::log(logging::Level::kError, "state not saved", {{"file", path_}, {"error", e}});
    return false;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  logging::log(loud ? logging::Level::kInfo : logging::Level::kDebug, "state saved",
               {{"file", path_}, {"rules", std::to_string(counts.rules)}, {"keys", std::to_string(counts.keys)},
                {"bytes", std::to_string(bytes.size())}, {"ms", std::to_string(ms)}});
  return true;
}

}  // namespace rk::serve
