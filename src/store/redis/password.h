// store/redis/password.h: the Redis password of --redis-password-file, read again whenever the file changes (its
// modification time or size), so that a rotated secret is used by the next AUTH without a restart.
//
//   rk::redis::PasswordFile file("/run/secrets/redis");  // throws if it cannot be read or is empty
//   client_auth(file.current());                          // on every (re)connection
//
// The password is the file's content without its final newline. A file that later cannot be read, or is empty,
// keeps the last good password (a secret being rewritten in place). Errors name the file, never its content.
// Thread safety: none; the client's thread only.
#pragma once

#include <ctime>
#include <string>

namespace rk::redis {

class PasswordFile {
 public:
  explicit PasswordFile(std::string path);
  const std::string& current();

 private:
  bool reread(std::string* error);  // false when the file cannot be read or is empty (`error` says why)

  std::string path_;
  std::string password_;
  timespec mtime_{};
  long long size_ = -1;
};

}  // namespace rk::redis
