// base/secret_file.h: a secret kept in a file (a password, a token), read again whenever the file changes, so
// that a rotated secret is used without a restart: a Kubernetes secret's symlink swap or a rename (a new inode),
// or a rewrite in place (a new size or modification time).
//
//   rk::base::SecretFile token("--admin-token-file", "/run/secrets/admin", rk::base::SecretFile::kVisibleAscii);
//   if (same_secret(given, *token.current())) ...   // current(): the file's content as of now, or the last good
//
// The secret is the file's content without its final line break (\n or \r\n). Construction throws
// std::invalid_argument naming the flag and the file, never the content, when the file cannot be read, is a
// directory, is empty or shorter than `min_bytes`, or (kVisibleAscii) holds anything but visible ASCII. A file
// that later fails any of these keeps the last good secret (a secret being rewritten in place): reread_failures()
// grows, and `on_rejected` (if any) is called with the same message, for the caller to log.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace rk::base {

// A file's identity and version as far as stat() tells (device, inode, size, modification time), or "-" when it
// cannot be stat-ed: two stamps differ when the file was replaced or rewritten.
std::string file_stamp(const std::string& path);

class SecretFile {
 public:
  enum Charset { kAnyBytes, kVisibleAscii };  // kVisibleAscii: what a header or a cookie can carry as it is

  using Rejected = std::function<void(const std::string& message)>;

  SecretFile(std::string flag, std::string path, Charset charset = kAnyBytes, std::size_t min_bytes = 1,
             Rejected on_rejected = {});

  // The secret as of now: the file read again if its stamp changed since it was last read.
  std::shared_ptr<const std::string> current();
  std::uint64_t reread_failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  // The file's content if it is a valid secret; otherwise nullptr and `error` says why.
  std::shared_ptr<const std::string> read(std::string& error) const;
  // The error as construction throws it and on_rejected hears it: the flag, the file, what is wrong.
  std::string message(const std::string& error) const;

  const std::string flag_, path_;
  const Charset charset_;
  const std::size_t min_bytes_;
  const Rejected on_rejected_;
  std::mutex mu_;
  std::shared_ptr<const std::string> secret_;  // mu_
  std::string stamp_;                          // mu_: the stamp of the version last read, good or not
  std::atomic<std::uint64_t> failures_{0};
};

}  // namespace rk::base
