// rules/reloader.h: the active RuleSet, and live reload from disk with last-known-good semantics.
//
// The path (a file or a directory of *.yaml / *.yml, listed and read by rules/files.h, one version at a time even
// while Kubernetes swaps a ConfigMap's "..data") is polled; when what is on disk changes (its rules_stamp), the new
// rules are parsed, validated and built off to the side, then swapped in with one pointer exchange. A broken file
// (or a special one, or one too big) never replaces good rules: the previous set stays active and the errors are
// reported to on_failure (logged and counted by the caller). Requests in flight keep the set they started with.
//
// Rules may also come from elsewhere (a control plane over xDS, rules/xds/client.h): load_files() takes them as
// rules files already read, through the same checks, swap and events; the path is then not used.
//
// Thread safety: current() may be called from any thread at any time; load_now(), load_files() and the poll thread
// serialise on an internal mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/periodic.h"
#include "rules/parse.h"
#include "rules/ruleset.h"

namespace rk::rules {

struct ReloadEvents {
  std::function<void(const RuleSet&)> on_success;
  std::function<void(const std::vector<ConfigError>&)> on_failure;
};

class Reloader {
 public:
  Reloader(std::string path, BuildOptions options, ReloadEvents events = {}, LoadOptions load = {});
  ~Reloader();

  // Loads what is on disk now. Returns the errors (empty on success, and then the new set is active).
  std::vector<ConfigError> load_now();

  // Loads `files` (named as the errors should name them) instead of what is on disk, as load_now() would load
  // them: the errors (none: the new set is active, unchanged rules keeping their counters).
  std::vector<ConfigError> load_files(const std::vector<RulesFile>& files);

  std::shared_ptr<const RuleSet> current() const {
    std::lock_guard lock(current_mu_);
    return current_;
  }

  // Reloads if what is on disk changed since the last attempt, good or bad. True if it tried.
  bool poll_once();

  // Polls the path every `interval` on a thread of its own, until stop() or destruction.
  void start(std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  void stop();

 private:
  std::vector<ConfigError> load_locked();
  std::vector<ConfigError> apply_locked(const std::vector<RulesFile>& files, std::vector<ConfigError> errors);

  const std::string path_;
  const BuildOptions options_;
  const ReloadEvents events_;
  const LoadOptions load_;
  // A mutex rather than std::atomic<std::shared_ptr>: libstdc++ 12's load() releases its lock bit with a relaxed
  // store, so its read of the pointer is not ordered before the next store's write (ThreadSanitizer reports it while
  // a ConfigMap's swaps reload under load). Held for a reference count's increment.
  mutable std::mutex current_mu_;
  std::shared_ptr<const RuleSet> current_;

  std::mutex mu_;          // serialises loads
  std::string last_seen_;  // rules_stamp() of the files the last load read, good or bad
  base::Periodic poll_;    // the polling thread, once started
};

}  // namespace rk::rules
