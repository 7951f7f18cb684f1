// base/secret_file.cc: reading secrets from files, and again when they change (secret_file.h).
#include "base/secret_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace rk::base {

std::string file_stamp(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "-";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

SecretFile::SecretFile(std::string flag, std::string path, Charset charset, std::size_t min_bytes, Rejected on_rejected)
    : flag_(std::move(flag)),
      path_(std::move(path)),
      charset_(charset),
      min_bytes_(std::max<std::size_t>(min_bytes, 1)),
      on_rejected_(std::move(on_rejected)) {
  stamp_ = file_stamp(path_);
  std::string error;
  secret_ = read(error);
  if (!secret_) throw std::invalid_argument(message(error));
}

std::string SecretFile::message(const std::string& error) const { return flag_ + ": '" + path_ + "' " + error; }

std::shared_ptr<const std::string> SecretFile::current() {
  const std::string stamp = file_stamp(path_);
  std::string error;
  std::unique_lock lock(mu_);
  if (stamp != stamp_ && stamp != "-") {
    if (auto secret = read(error)) {
      secret_ = std::move(secret);
    } else {
      failures_.fetch_add(1, std::memory_order_relaxed);  // this version is not read again: the next change is
    }
    stamp_ = stamp;
  }
  std::shared_ptr<const std::string> secret = secret_;
  lock.unlock();
  if (!error.empty() && on_rejected_) on_rejected_(message(error));
  return secret;
}

std::shared_ptr<const std::string> SecretFile::read(std::string& error) const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    error = std::string("cannot be read: ") + std::strerror(errno);
    return nullptr;
  }
  if (S_ISDIR(st.st_mode)) {
    error = "is a directory, not a file holding the secret";
    return nullptr;
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    error = std::string("cannot be read: ") + std::strerror(errno);
    return nullptr;
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty()) {
    error = "is empty; it must hold the secret";
    return nullptr;
  }
  if (text.size() < min_bytes_) {
    error = "is " + std::to_string(text.size()) + (text.size() == 1 ? " byte" : " bytes") +
            " long; it must be at least " + std::to_string(min_bytes_) + " bytes";
    return nullptr;
  }
  if (charset_ == kVisibleAscii) {
    for (const char c : text) {
      if (c < 0x21 || c > 0x7e) {
        error = "must hold one line of visible ASCII (no space, tab or control character)";
        return nullptr;
      }
    }
  }
  return std::make_shared<const std::string>(std::move(text));
}

}  // namespace rk::base
