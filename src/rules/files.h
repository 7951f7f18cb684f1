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
// and no more than the bound and one byte is ever read of any file, whatever it grows to while read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rules/config.h"

namespace rk::rules {

// A rules file over 16 MiB is refused (docs/rules.md, "Limits").
inline constexpr std::size_t kMaxRulesFileBytes = 16u << 20;

struct RulesFile {
  std::string name;  // as listed: the path, or the directory's path joined with the entry's name
  std::string text;
};

// The rules files of `path`, sorted, of any type (read_rules_files refuses what is not a regular file), without
// reading any. A directory that cannot be read, or a path that does not exist, is an error.
std::vector<std::string> list_rules_files(const std::string& path, std::vector<ConfigError>& errors);

// Every listed file's text, in order. Returns every refusal and every file that could not be read; `out` holds the
// files that were read.
std::vector<ConfigError> read_rules_files(const std::string& path, std::vector<RulesFile>& out);

// The error of a text over kMaxRulesFileBytes, `bytes` long.
std::string over_the_limit(std::uintmax_t bytes);

}  // namespace rk::rules
