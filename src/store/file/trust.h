// store/file/trust.h: a store's file opened only if it can be believed: the one check that the shared-memory
// store's region (store/shm/region_file.h) and serve's state file (cli/serve/state_file.h) both pass.
//
//   const rk::store::file::TrustedFile f = rk::store::file::open_trusted(path, O_RDONLY, 0644, "a state file may
//   have"); if (!f.refused.empty()) ...       // there is a file, and this says why it is not believed (naming the
//   path) else if (f.fd < 0) ...            // f.error: errno of the open (ENOENT: nothing at the path) else ...
//   f.st.st_size ...; ::close(f.fd);
//
// Whoever owns a store's file, or may write it, decides every limit kept in it; whoever may read it sees every key.
// So the path itself must not be a symbolic link (opened with O_NOFOLLOW: a link could point the store at any
// file), and what is opened must be a regular file (not a FIFO or a device: opened with O_NONBLOCK, so that a FIFO
// cannot hang the open either), owned by this process's effective uid, whose group and other permission bits are
// within `allowed_mode`. The check is made with fstat on the opened descriptor, so the file checked is the file read.
#pragma once

#include <sys/stat.h>

#include <string>

namespace rk::store::file {

// Why the file fstat described as `st`, found at `path`, is not to be believed, or "". `allowed` names where the
// allowed mode comes from, for the message ("asked for (SharedOptions::mode)").
std::string distrust(const struct stat& st, const std::string& path, unsigned allowed_mode, const std::string& allowed);

// A permission mode as chmod takes it, four octal digits: octal(0644) -> "0644".
std::string octal(unsigned mode);

struct TrustedFile {
  int fd = -1;          // the caller's to close; -1: nothing opened
  struct stat st {};    // the opened file's fstat
  std::string refused;  // why the file at the path is not believed (fd -1), or ""
  int error = 0;        // errno of an open or fstat that failed (fd -1, refused ""): ENOENT when nothing is there
};

// Opens `path` with `flags` (O_RDONLY or O_RDWR; O_NOFOLLOW, O_NONBLOCK, O_NOCTTY and O_CLOEXEC are added) and
// checks the file as above.
TrustedFile open_trusted(const std::string& path, int flags, unsigned allowed_mode, const std::string& allowed);

}  // namespace rk::store::file
