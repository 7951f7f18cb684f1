#include "rules/reloader.h"

#include "base/content_hash.h"
#include "rules/files.h"

namespace rk::rules {

Reloader::Reloader(std::string path, BuildOptions options, ReloadEvents events, LoadOptions load)
    : path_(std::move(path)), options_(std::move(options)), events_(std::move(events)), load_(load) {}

Reloader::~Reloader() { stop(); }

std::vector<ConfigError> Reloader::load_now() {
  std::lock_guard lock(mu_);
  return load_locked();
}

// last_seen_ is the stamp of the files as read, not as polled: a change between the poll and the read is loaded
// now and not again at the next poll.
std::vector<ConfigError> Reloader::load_locked() {
  std::vector<RulesFile> files;
  std::vector<ConfigError> errors = read_rules_files(path_, files, &last_seen_, load_.skip_dotfiles);
  return apply_locked(files, std::move(errors));
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
  std::shared_ptr<const RuleSet> old = next;
  {
    std::lock_guard lock(current_mu_);
    current_.swap(old);
  }  // the set replaced is let go of outside the lock (its last reference may free every rule)
  if (events_.on_success) events_.on_success(*next);
  return errors;
}

bool Reloader::poll_once() {
  std::lock_guard lock(mu_);
  if (rules_stamp(path_, load_.skip_dotfiles) == last_seen_) return false;
  load_locked();
  return true;
}

void Reloader::start(std::chrono::milliseconds interval) {
  poll_.start(interval, [this] { poll_once(); });
}

void Reloader::stop() { poll_.stop(); }

}  // namespace rk::rules
