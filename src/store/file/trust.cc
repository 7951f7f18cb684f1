// store/file/trust.cc: whether a store's file can be believed (store/file/trust.h).
#include "store/file/trust.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace rk::store::file {

std::string octal(unsigned mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

std::string distrust(const struct stat& st, const std::string& path, unsigned allowed_mode,
                     const std::string& allowed) {
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file; refused";
  if (st.st_uid != ::geteuid()) {
    return path + " belongs to uid " + std::to_string(st.st_uid) + ", not to this process's uid " +
           std::to_string(::geteuid()) + "; refused: its owner could change the limits in it";
  }
  const unsigned extra = static_cast<unsigned>(st.st_mode) & 077 & ~allowed_mode;
  if (extra == 0) return "";
  const char* why = (extra & 022) != 0   ? "whoever can write it can change the limits"
                    : (extra & 044) != 0 ? "whoever can read it sees every key (client addresses, API keys)"
                                         : "only the bits allowed may be set";
  return path + " has mode " + octal(st.st_mode & 07777) + ", which gives group or others " + octal(extra) +
         " beyond the " + octal(allowed_mode) + " " + allowed + "; refused: " + why;
}

TrustedFile open_trusted(const std::string& path, int flags, unsigned allowed_mode, const std::string& allowed) {
  TrustedFile f;
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    f.error = errno;
    struct stat st {};
    if (f.error == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      f.refused = path + " is a symbolic link; refused: a link could point the store at any file";
    }
    return f;
  }
  if (::fstat(fd, &f.st) != 0) {
    f.error = errno;
    ::close(fd);
    return f;
  }
  f.refused = distrust(f.st, path, allowed_mode, allowed);
  if (f.refused.empty()) f.fd = fd;
  else ::close(fd);
  return f;
}

}  // namespace rk::store::file
