// store/shm/region_file.h: a shared store's file, created or attached to without trusting whoever else can write
// in its directory (such as /dev/shm, which every user can).
//
// Creating: the region is made in an unnamed file (O_TMPFILE; a random name where the file system lacks it),
// given exactly `mode`, sized, formatted, then linked under `path` only if nothing is there yet. So no one ever
// sees a half-formatted region, nothing is locked after the call, and a creator that dies leaves nothing behind.
// Attaching: the file must pass store/file/trust.h's check: not a symbolic link, a regular file owned by this
// process's effective uid, whose group and other permission bits are within `mode`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace rk::store::shm {

struct MappedFile {
  unsigned char* base = nullptr;  // mapped shared, read-write; the caller unmaps it (munmap(base, bytes))
  std::size_t bytes = 0;          // the file's size
  bool created = false;           // this call created it and ran `format` on it
};

// The region at `path`: attached to if it exists (its contents unchecked: that is the caller's part), else created
// with `bytes` bytes and `format` run on it before it appears. Throws InvalidArgument for a file it refuses to
// trust (naming why), std::system_error for what the OS refuses.
MappedFile map_region_file(const std::string& path, std::size_t bytes, unsigned mode,
                           const std::function<void(unsigned char*)>& format);

}  // namespace rk::store::shm
