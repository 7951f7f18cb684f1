// rules/files.cc: rules files listed and read (rules/files.h), special files refused unread.
#include "rules/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

namespace rk::rules {

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unknown kind of file";
}

// What `file` is, if not a regular file: its kind, and through which symbolic link.
ConfigError not_regular(const ListedFile& file, mode_t mode) {
  std::string what = kind_of(mode);
  std::error_code ec;
  if (std::filesystem::is_symlink(file.path, ec)) {
    const std::string target = std::filesystem::read_symlink(file.path, ec).string();
    if (!ec) what = "a symbolic link to " + target + ", " + what;
  }
  return {{file.name, 0, 0},
          what + ", not a regular file: refused unread (a rules file is a regular file, or a symbolic link to one)"};
}

ConfigError cannot_open(const std::string& name, int error) {
  return {{name, 0, 0}, std::string("cannot open: ") + std::strerror(error)};
}

// One file's text, or the error that refuses it. stat() first, so that a special file is never opened; then the
// opened descriptor's own fstat(), since the name may have been swapped in between; O_NONBLOCK, so that even then a
// FIFO's open does not wait for a writer.
std::optional<ConfigError> read_file(const ListedFile& file, std::string& text) {
  const std::string& name = file.name;
  struct stat st {};
  if (::stat(file.path.c_str(), &st) != 0) return cannot_open(name, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(file, st.st_mode);
  const int fd = ::open(file.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return cannot_open(name, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) return cannot_open(name, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(file, st.st_mode);
  if (static_cast<std::uintmax_t>(st.st_size) > kMaxRulesFileBytes) {
    return ConfigError{{name, 0, 0}, over_the_limit(static_cast<std::uintmax_t>(st.st_size))};
  }
  // Up to one byte past the bound, whatever the size said: the file may grow while read. Room for the size and a
  // byte, so that the end is seen in the usual case without growing the buffer.
  text.resize(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (got > kMaxRulesFileBytes) break;
      text.resize(std::min(2 * got, kMaxRulesFileBytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ConfigError{{name, 0, 0}, std::string("cannot read: ") + std::strerror(errno)};
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > kMaxRulesFileBytes) {
    return ConfigError{
        {name, 0, 0},
        "the file grew past the limit of " + std::to_string(kMaxRulesFileBytes) + " bytes while it was read"};
  }
  text.resize(got);
  return std::nullopt;
}

// A folder's *.yaml and *.yml entries (but those named with a dot, with `skip_dotfiles`), read from `from` and
// named under `shown`.
void list_folder(const std::filesystem::path& from, const std::filesystem::path& shown, bool skip_dotfiles,
                 std::vector<ListedFile>& files, std::error_code& ec) {
  for (std::filesystem::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (ext != ".yaml" && ext != ".yml") continue;
    if (skip_dotfiles && it->path().filename().string().starts_with('.')) continue;
    files.push_back({(shown / it->path().filename()).string(), it->path().string()});
  }
}

// How Kubernetes names the link to a volume's current version (its AtomicWriter).
constexpr const char* kDataLink = "..data";

// A file's line of the stamp: its name, where it is read from, and its stat() (no file opened).
std::string stamp_of(const std::vector<ListedFile>& files, const std::vector<ConfigError>& errors) {
  std::string stamp;
  for (const ListedFile& f : files) {
    struct stat st {};
    stamp += f.name + " " + f.path;
    if (::stat(f.path.c_str(), &st) == 0) {
      stamp += ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
               std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino);
    } else {
      stamp += ":missing";
    }
    stamp += "\n";
  }
  for (const ConfigError& e : errors) stamp += e.to_string() + "\n";
  return stamp;
}

}  // namespace

std::string over_the_limit(std::uintmax_t bytes) {
  return "the file is " + std::to_string(bytes) + " bytes, over the limit of " + std::to_string(kMaxRulesFileBytes);
}

std::vector<ListedFile> list_rules_files(const std::string& path, std::vector<ConfigError>& errors,
                                         bool skip_dotfiles) {
  namespace fs = std::filesystem;
  std::vector<ListedFile> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path data = fs::path(path) / kDataLink;
    if (fs::is_symlink(data, ec)) {
      // Resolved once: every file of this listing is of the version "..data" names now.
      const fs::path target = fs::read_symlink(data, ec);
      if (!ec) list_folder(target.is_absolute() ? target : fs::path(path) / target, path, skip_dotfiles, files, ec);
      if (ec) {
        errors.push_back(
            {{data.string(), 0, 0}, "cannot read the folder it links to (" + target.string() + "): " + ec.message()});
      }
    } else {
      list_folder(path, path, skip_dotfiles, files, ec);
      if (ec) errors.push_back({{path, 0, 0}, "cannot read the directory: " + ec.message()});
    }
    std::sort(files.begin(), files.end(), [](const ListedFile& a, const ListedFile& b) { return a.name < b.name; });
  } else if (fs::exists(path, ec)) {
    files.push_back({path, path});  // whatever it is: read_rules_files says if it is not a regular file
  } else {
    errors.push_back({{path, 0, 0}, "no such file or directory"});
  }
  return files;
}

std::string rules_stamp(const std::string& path, bool skip_dotfiles) {
  std::vector<ConfigError> errors;
  const std::vector<ListedFile> files = list_rules_files(path, errors, skip_dotfiles);
  return stamp_of(files, errors);
}

std::vector<ConfigError> read_rules_files(const std::string& path, std::vector<RulesFile>& out, std::string* stamp,
                                          bool skip_dotfiles) {
  for (int attempt = 1;; ++attempt) {
    out.clear();
    std::vector<ConfigError> errors;
    const std::vector<ListedFile> files = list_rules_files(path, errors, skip_dotfiles);
    const std::string before = stamp_of(files, errors);
    for (const ListedFile& f : files) {
      std::string text;
      if (auto refused = read_file(f, text)) {
        errors.push_back(std::move(*refused));
        continue;
      }
      out.push_back({f.name, std::move(text)});
    }
    std::string after = rules_stamp(path, skip_dotfiles);
    if (after == before || attempt == kReadAttempts) {
      if (after != before) {
        errors.push_back({{path, 0, 0},
                          "the rules files changed while they were read, each of " + std::to_string(kReadAttempts) +
                              " times; read again when they change"});
      }
      if (stamp) *stamp = std::move(after);
      return errors;
    }
  }
}

}  // namespace rk::rules
