// rules/files.h: the rules files of a path, listed and read in one place, for the loader (and so check-config) and
// the reloader's poll and version. A file, or a directory's *.yaml and *.yml entries sorted by name.
//
//   std::vector<rk::rules::RulesFile> files;
//   auto errors = rk::rules::read_rules_files("/etc/ratekeeper/rules", files);  // each file's name and text
//
// An entry that is not a regular file once symbolic links are followed (a FIFO, a device such as /dev/zero, a
// directory, a socket) is refused with its name and never opened for reading: a FIFO's open would wait for a
// writer, a device's read might never end. A symbolic link to a regular file is read as the file (a Kubernetes
// ConfigMap mounts each file as one, through "..data"). A file over kMaxRulesFileBytes is refused with its size,
// and no more than the bound and one byte is ever read of any file, whatever it grows to while read. With
// `skip_dotfiles` (serve's --skip-dotfiles, upstream's RUNTIME_IGNOREDOTFILES), an entry whose name starts with a dot
// is not listed; "..data" is still followed, and the files of its folder named with a dot are skipped alike.
//
// One version, never a mix: a folder with a "..data" link is read as Kubernetes writes a ConfigMap's volume (an
// update is a new timestamped folder, then "..data" renamed to it, then the old folder deleted): "..data" is resolved
// once, and the rules files are that folder's, shown under the mounted folder's name. And a read is kept only if the
// files' stamp (rules_stamp) is the same after it as before; otherwise it is done again, up to kReadAttempts times.
// So a swap, or a file replaced, while the files are read never loads half of one version and half of another.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rules/config.h"

namespace rk::rules {

// A rules file over 16 MiB is refused (docs/rules.md, "Limits").
inline constexpr std::size_t kMaxRulesFileBytes = 16u << 20;

// A read that finds the files changed by its end is done again, up to this many times in all, then refused.
inline constexpr int kReadAttempts = 8;

struct RulesFile {
  std::string name;  // as listed: the path, or the directory's path joined with the entry's name
  std::string text;
};

// A listed rules file: its name (as RulesFile's, and in errors) and the path it is read from (in a Kubernetes
// volume, inside the folder "..data" named when listed).
struct ListedFile {
  std::string name;
  std::string path;
};

// The rules files of `path`, sorted, of any type (read_rules_files refuses what is not a regular file), without
// reading any. A directory that cannot be read, a path that does not exist, or a "..data" link whose folder cannot
// be read, is an error.
std::vector<ListedFile> list_rules_files(const std::string& path, std::vector<ConfigError>& errors,
                                         bool skip_dotfiles = false);

// What the rules files of `path` are now, without opening any: where "..data" leads, and each file's name, size,
// modification time and inode (stat() only: cheap enough for every poll). Unchanged while no file changes.
std::string rules_stamp(const std::string& path, bool skip_dotfiles = false);

// Every listed file's text, in order, all of one version (above). Returns every refusal and every file that could
// not be read; `out` holds the files that were read; `stamp`, if given, gets rules_stamp() of what was read.
std::vector<ConfigError> read_rules_files(const std::string& path, std::vector<RulesFile>& out,
                                          std::string* stamp = nullptr, bool skip_dotfiles = false);

// The error of a text over kMaxRulesFileBytes, `bytes` long.
std::string over_the_limit(std::uintmax_t bytes);

}  // namespace rk::rules
