// store/redis/password.cc: reading --redis-password-file (password.h).
#include "store/redis/password.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace rk::redis {

PasswordFile::PasswordFile(std::string path) : path_(std::move(path)) {
  std::string error;
  if (!reread(&error)) throw std::invalid_argument("--redis-password-file: '" + path_ + "' " + error);
}

const std::string& PasswordFile::current() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 &&
      (st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_)) {
    reread(nullptr);
  }
  return password_;
}

bool PasswordFile::reread(std::string* error) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (error) *error = std::string("cannot be read: ") + std::strerror(errno);
    return false;
  }
  std::ifstream in(path_, std::ios::binary);
  std::string password(std::istreambuf_iterator<char>(in), {});
  if (!in || S_ISDIR(st.st_mode)) {
    if (error) *error = S_ISDIR(st.st_mode) ? "is a directory" : std::string("cannot be read: ") + std::strerror(errno);
    return false;
  }
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) password.pop_back();
  if (password.empty()) {
    if (error) *error = "is empty";
    return false;
  }
  password_ = std::move(password);
  mtime_ = st.st_mtim;
  size_ = static_cast<long long>(st.st_size);
  return true;
}

}  // namespace rk::redis
