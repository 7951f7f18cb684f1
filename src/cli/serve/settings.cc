// cli/serve/settings.cc: a settings file read into (name, value, where) triples, each given to serve's flags on
// its own, so that a problem names its setting and its line.
#include "cli/serve/settings.h"

#include <yaml-cpp/yaml.h>

#include "yaml/reader.h"

namespace rk::cli::serve {

namespace {

struct Setting {
  std::string name, value;
  YAML::Mark name_at, value_at;
};

std::string where(const std::string& path, const YAML::Mark& m) { return yaml::position(path, m).to_string() + ": "; }

// The file's mapping as triples; what is not a setting at all goes to `errors`.
std::vector<Setting> read_settings(const std::string& path, std::vector<std::string>& errors) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    errors.push_back("--settings: cannot read " + path);
    return {};
  } catch (const YAML::Exception& e) {
    errors.push_back(where(path, e.mark) + e.msg);
    return {};
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) {
    errors.push_back(path + ": a settings file is a mapping of flag names to values (redis: redis://127.0.0.1:6379)");
    return {};
  }
  std::vector<Setting> out;
  for (const auto& item : root) {
    const std::string name = item.first.Scalar();
    if (name == "settings" || name == "help" || name.empty() || name.starts_with("-")) {
      errors.push_back(where(path, item.first.Mark()) + "'" + name +
                       "' is not a setting (flag names without their dashes)");
    } else if (!item.second.IsScalar()) {
      errors.push_back(where(path, item.second.Mark()) + "setting '" + name + "' takes a single value");
    } else {
      out.push_back({name, item.second.Scalar(), item.first.Mark(), item.second.Mark()});
    }
  }
  return out;
}

// One setting through serve's flags, into `f`; its problems, located and named as the file names it.
void apply_setting(const std::string& path, const Setting& s, ServeFlags& f, std::vector<std::string>& errors) {
  cli::FlagSet flags(kServeUsage);
  add_serve_flags(flags, f, /*with_settings=*/false);
  const std::string flag = "--" + s.name;
  // A toggle takes its value only after '=' (shadow-mode: false); any other flag takes the next argument, even an
  // empty one (redis: "").
  const std::vector<std::string> args = flags.is_toggle(flag) ? std::vector<std::string>{flag + "=" + s.value}
                                                              : std::vector<std::string>{flag, s.value};
  for (const cli::FlagProblem& p : flags.parse(args).problems) {
    using Kind = cli::FlagProblem::Kind;
    if (p.kind == Kind::kUnknownFlag) {
      errors.push_back(where(path, s.name_at) + "unknown setting '" + s.name + "'");
      return;  // its value is no problem of its own
    }
    errors.push_back(where(path, s.value_at) + s.name + ": " + (p.kind == Kind::kBadValue ? p.message : p.to_string()));
  }
}

}  // namespace

std::vector<std::string> apply_settings(const std::string& path, ServeFlags& f) {
  std::vector<std::string> errors;
  for (const Setting& s : read_settings(path, errors)) apply_setting(path, s, f, errors);
  return errors;
}

}  // namespace rk::cli::serve
