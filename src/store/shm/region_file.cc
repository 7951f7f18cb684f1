// The shared store's file (store/shm/region_file.h). The directory may be writable by anyone (/dev/shm is), so
// nothing found at the path is trusted before fstat says whose it is and who else may write it, and a file is
// never created at the path itself: it appears there already formatted, or not at all.
#include "store/shm/region_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <system_error>

#include "ratekeeper/params.h"
#include "store/file/trust.h"
#include "store/shm/testing.h"

namespace rk {

#if defined(RK_TEST_HOOKS)
namespace store::shm_testing {
bool no_tmpfile = false;
}
#endif

namespace store::shm {
namespace {

std::system_error os_error(const std::string& what) { return {errno, std::generic_category(), what}; }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// A shared read-write mapping of a whole file, unmapped unless handed over.
class Mapping {
 public:
  Mapping(int fd, std::size_t bytes, const std::string& path) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw os_error("mmap of " + path);
    base_ = static_cast<unsigned char*>(p);
  }
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  unsigned char* base() const { return base_; }
  MappedFile release(bool created) {
    const MappedFile m{base_, bytes_, created};
    base_ = nullptr;
    return m;
  }

 private:
  unsigned char* base_ = nullptr;
  std::size_t bytes_;
};

// A file store/file/trust.h believed, `st` its fstat.
MappedFile attach(int fd, const struct stat& st, const std::string& path) {
  if (st.st_size <= 0) throw InvalidArgument(path + " is 0 bytes: not a ratekeeper shared store");
  Mapping m(fd, static_cast<std::size_t>(st.st_size), path);
  return m.release(false);
}

// Links the unnamed file under path; false if something is there already.
bool link_unnamed(int fd, const std::string& path) {
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  // Without /proc, the direct way (which needs CAP_DAC_READ_SEARCH).
  if (errno == ENOENT && ::linkat(fd, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH) == 0) return true;
  if (errno == EEXIST) return false;
  throw os_error("linking the new shared store into place as " + path);
}

// A new, formatted region at path; nullopt if another process put one there first.
std::optional<MappedFile> create(const std::string& path, std::size_t bytes, unsigned mode,
                                 const std::function<void(unsigned char*)>& format) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int raw = -1;
  if (store::shm_testing::without_tmpfile()) errno = EOPNOTSUPP;
  else raw = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  std::string temp;  // the file's name, where O_TMPFILE is not available; removed on every way out
  if (raw < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string name = path + ".rk-XXXXXX";
    raw = ::mkostemp(name.data(), O_CLOEXEC);  // O_EXCL, a random name, mode 0600
    if (raw < 0) throw os_error("creating a temporary file beside " + path);
    temp = std::move(name);
  } else if (raw < 0) {
    throw os_error("creating the shared store in " + dir);
  }
  Fd fd(raw);
  struct Unlink {
    const std::string& name;
    ~Unlink() {
      if (!name.empty()) ::unlink(name.c_str());
    }
  } unlink_temp{temp};
  if (::fchmod(fd.get(), mode) != 0) throw os_error("chmod " + store::file::octal(mode) + " of the new " + path);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) throw os_error("sizing " + path);
  Mapping m(fd.get(), bytes, path);
  format(m.base());
  bool linked = false;
  if (temp.empty()) {
    linked = link_unnamed(fd.get(), path);
  } else if (::link(temp.c_str(), path.c_str()) == 0) {
    linked = true;
  } else if (errno != EEXIST) {
    throw os_error("linking " + temp + " into place as " + path);
  }
  if (!linked) return std::nullopt;
  return m.release(true);
}

}  // namespace

MappedFile map_region_file(const std::string& path, std::size_t bytes, unsigned mode,
                           const std::function<void(unsigned char*)>& format) {
  if ((mode & ~0777u) != 0 || (mode & 0600u) != 0600u) {
    throw InvalidArgument("mode " + store::file::octal(mode) +
                          " is not a permission mode that lets the owner read and write (SharedOptions::mode: 0600 to "
                          "0777)");
  }
  // A few rounds: between a failed open and a failed link, another process may have removed the file.
  for (int round = 0; round < 8; ++round) {
    const store::file::TrustedFile f = store::file::open_trusted(path, O_RDWR, mode, "asked for (SharedOptions::mode)");
    if (!f.refused.empty()) throw InvalidArgument(f.refused);
    if (f.fd >= 0) {
      const Fd fd(f.fd);
      return attach(fd.get(), f.st, path);
    }
    if (f.error != ENOENT) {
      errno = f.error;
      throw os_error("opening the shared store " + path);
    }
    if (auto made = create(path, bytes, mode, format)) return *made;
  }
  throw InvalidArgument(path + " kept appearing and disappearing while it was being opened; is something removing it?");
}

}  // namespace store::shm
}  // namespace rk
