#include "rules/reloader.h"

#include "base/content_hash.h"

#include <sys/stat.h>

#include "rules/files.h"

namespace rk::rules {

Reloader::Reloader(std::string path, BuildOptions options, ReloadEvents events, LoadOptions load)
    : path_(std::move(path)), options_(std::move(options)), events_(std::move(events)), load_(load) {}

Reloader::~Reloader() { stop(); }

// Names, sizes, modification times and inodes (stat() only: no file is opened): cheap to read every poll; a change
// means "read the files".
std::string Reloader::disk_fingerprint() const {
  std::vector<ConfigError> errors;
  std::string fp;
  for (const std::string& f : list_rules_files(path_, errors)) {
    struct stat st {};
    fp += f;
    if (::stat(f.c_str(), &st) == 0) {
      fp += ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
            std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ino);
    } else {
      fp += ":missing";
    }
    fp += "\n";
  }
  for (const ConfigError& e : errors) fp += e.to_string() + "\n";
  return fp;
}

std::vector<ConfigError> Reloader::load_now() {
  std::lock_guard lock(mu_);
  return load_locked(disk_fingerprint());
}

std::vector<ConfigError> Reloader::load_locked(const std::string& fingerprint) {
  last_seen_ = fingerprint;
  std::vector<RulesFile> files;
  return apply_locked(files, read_rules_files(path_, files));
}

std::vector<ConfigError> Reloader::load_files(const std::vector<RulesFile>& files) {
  std::lock_guard lock(mu_);
  return apply_locked(files, {});
}

// `errors`: those of reading `files`, to which the parse's are added.
std::vector<ConfigError> Reloader::apply_locked(const std::vector<RulesFile>& files, std::vector<ConfigError> errors) {
  std::vector<DomainConfig> domains;
  for (ConfigError& e : parse_rules_files(files, domains, load_)) errors.push_back(std::move(e));
  if (!errors.empty()) {
    if (events_.on_failure) events_.on_failure(errors);
    return errors;
  }
  // The version hashes what was parsed, file names included.
  std::string text;
  for (const RulesFile& f : files) text += f.name + "\n" + f.text + "\n";
  const auto previous = current();
  auto next = RuleSet::build(std::move(domains), previous.get(), options_, base::content_hash(text));
  current_.store(next, std::memory_order_release);
  if (events_.on_success) events_.on_success(*next);
  return errors;
}

bool Reloader::poll_once() {
  std::lock_guard lock(mu_);
  const std::string fp = disk_fingerprint();
  if (fp == last_seen_) return false;
  load_locked(fp);
  return true;
}

void Reloader::start(std::chrono::milliseconds interval) {
  poll_.start(interval, [this] { poll_once(); });
}

void Reloader::stop() { poll_.stop(); }

}  // namespace rk::rules
