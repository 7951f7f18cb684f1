// yaml/reader.h: a YAML document's values read as ratekeeper's types (strings, booleans, whole numbers, numbers,
// durations, maps of known keys), every problem kept with its file, line and column rather than thrown. Rules files
// (rules/) and simulator scenarios (sim/) both read through it, so a value is spelled alike in both and a mistake
// is named alike: "<where>: <what is wrong>".
//
//   std::vector<rk::yaml::Problem> problems;
//   rk::yaml::read_document(text, "limiter.yaml", problems, [&](const YAML::Node& root) {
//     rk::yaml::Reader r("limiter.yaml", problems);
//     if (!r.check_map(root, "limiter", {"limit", "window"})) return;
//     if (root["limit"]) limit = r.whole(root["limit"], "limiter.limit", 1, 1000);  // nullopt, and a problem
//   });
//   for (const auto& p : problems) std::cerr << p.to_string() << "\n";   // limiter.yaml:2:8: limiter.limit: ...
//
// Booleans are YAML 1.2's core schema, and only it: true, True, TRUE, false, False, FALSE. Not YAML 1.1's yes, no,
// on, off, y, n (yaml-cpp's as<bool>() still takes those), so `shadow_mode: no` is a mistake named rather than a
// meaning guessed.
//
// Thread safety: a Reader writes to its problem list; use one per document and thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/source_position.h"
#include "ratekeeper/units.h"

namespace rk::yaml {

// A problem and its place in `file` (base/source_position.h: the one such type of rules files and scenarios too).
using Problem = base::SourceError;

// Where yaml-cpp's mark (0-based) stands in `file`, 1-based; line 0 for the null mark of a node made in code.
base::SourcePos position(const std::string& file, const YAML::Mark& m);

// Parses `text`, the contents of `file`, and hands its root to `read`. YAML that does not parse is one problem,
// "not valid YAML: ...", at its place, and `read` is not called; an exception yaml-cpp throws while `read` walks the
// document becomes one more, "unreadable: ...". No yaml-cpp exception leaves.
void read_document(std::string_view text, const std::string& file, std::vector<Problem>& problems,
                   const std::function<void(const YAML::Node& root)>& read);

// Each reading function takes the node and `where`, the dotted name of its place ("limiter.window"), which opens
// the message of any problem with it; it answers nullopt when the value is not of its type.
class Reader {
 public:
  Reader(std::string file, std::vector<Problem>& problems) : file_(std::move(file)), problems_(problems) {}

  const std::string& file() const { return file_; }
  base::SourcePos pos(const YAML::Node& n) const { return position(file_, n.Mark()); }
  void fail(const YAML::Node& n, std::string message) { fail(pos(n), std::move(message)); }
  void fail(base::SourcePos at, std::string message) { problems_.push_back({std::move(at), std::move(message)}); }
  // How many problems so far: a reader checks what depends on a part only when the part added none.
  std::size_t problem_count() const { return problems_.size(); }

  // Checks `n` is a map whose keys are plain names in `allowed`, each given once. False only if it is not a map
  // (an unknown or repeated key is a problem, and the rest of the map can still be read).
  bool check_map(const YAML::Node& n, const std::string& where, std::initializer_list<std::string_view> allowed) {
    return check_map(n, where, std::vector<std::string_view>(allowed));
  }
  bool check_map(const YAML::Node& n, const std::string& where, const std::vector<std::string_view>& allowed);

  std::optional<std::string> string(const YAML::Node& n, const std::string& where);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& where);
  // A whole number from lo to hi, written in decimal digits.
  std::optional<std::uint64_t> whole(const YAML::Node& n, const std::string& where, std::uint64_t lo, std::uint64_t hi);
  // A finite number.
  std::optional<double> number(const YAML::Node& n, const std::string& where);
  // A duration as rk::parse_duration reads it ("10s", "250ms", "1.5m", "2h", "1d"), never negative.
  std::optional<Nanos> duration(const YAML::Node& n, const std::string& where);

 private:
  std::string file_;
  std::vector<Problem>& problems_;
};

}  // namespace rk::yaml
