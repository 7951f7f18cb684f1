// cli/flag_set.cc: the CLI11 app behind every command's flags, its help layout, and CLI11's outcomes in our words.
#include "cli/flag_set.h"

#include <algorithm>
#include <charconv>

namespace rk::cli {

namespace {

// Our usage line(s) first, then the flags, then the notes: the same layout for every command.
class Layout : public CLI::Formatter {
 public:
  explicit Layout(std::string usage, std::string notes) : usage_(std::move(usage)), notes_(std::move(notes)) {
    column_width(28);
    label("Positionals", "arguments");
  }
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    std::string out = usage_;
    out += make_positionals(app);
    out += make_groups(app, mode);
    if (!notes_.empty()) out += "\n" + notes_;
    return out;
  }

 private:
  std::string usage_, notes_;
};

bool looks_like_flag(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

// What CLI11 left over: flags it does not know, and arguments nobody takes. The value after an unknown flag is
// taken to be its own, so that "--frobnicate 1" is one problem, not two.
void leftovers(const std::vector<std::string>& rest, std::vector<FlagProblem>& problems) {
  bool after_unknown = false;
  for (const std::string& arg : rest) {
    if (looks_like_flag(arg)) {
      problems.push_back({FlagProblem::Kind::kUnknownFlag, arg.substr(0, arg.find('=')), ""});
      after_unknown = arg.find('=') == std::string::npos;
    } else if (!after_unknown) {
      problems.push_back({FlagProblem::Kind::kUnexpected, arg, ""});
    } else {
      after_unknown = false;
    }
  }
}

}  // namespace

std::string help_hint(std::string_view command) { return "see '" + std::string(command) + " --help' for the flags\n"; }

std::string FlagProblem::to_string() const {
  switch (kind) {
    case Kind::kBadValue: return flag.empty() ? message : flag + ": " + message;
    case Kind::kUnknownFlag: return "unknown flag " + flag;
    case Kind::kNoValue: return flag + " needs a value";
    case Kind::kUnexpected: break;
  }
  return "unexpected argument '" + flag + "'";
}

FlagSet::FlagSet(std::string usage, std::string notes) : app_(std::make_unique<CLI::App>()) {
  app_->formatter(std::make_shared<Layout>(std::move(usage), std::move(notes)));
  // The last one given wins, as it always has: a settings file's value, then the command line's.
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app_->option_defaults()->group("flags");
  app_->set_help_flag("-h,--help", "this help");
  app_->allow_extras();  // reported in our words by parse()
}

CLI::Validator FlagSet::recorder(const std::string& name, Reader read) {
  // A Validator sees every occurrence, in order (a callback would see the last alone): each is checked and stored.
  auto check = [this, name, read = std::move(read)](std::string& v) {
    if (std::string e = read(v); !e.empty()) problems_.push_back({FlagProblem::Kind::kBadValue, name, std::move(e)});
    return std::string();
  };
  return CLI::Validator(check, "", "");
}

void FlagSet::value(const std::string& name, const std::string& text, const std::string& help, Reader read) {
  app_->add_option(name, help)->option_text(text)->check(recorder(name, std::move(read)));
}

void FlagSet::toggle(const std::string& name, const std::string& help, bool& on) {
  // CLI11 hands a flag's value on as given ("--shadow-mode=false"), "true" when there is none.
  app_->add_flag(name, help)->check(recorder(name, [&on](const std::string& v) {
    if (v != "true" && v != "false") return is_not(v, "true or false");
    on = v == "true";
    return std::string();
  }));
}

void FlagSet::positional(const std::string& name, const std::string& help, std::string& out) {
  app_->add_option(name, out, help)->type_name("");
}

bool FlagSet::is_toggle(const std::string& name) const {
  const CLI::Option* o = app_->get_option_no_throw(name);
  return o != nullptr && o->get_expected_max() == 0 && o != app_->get_help_ptr();
}

bool FlagSet::has(const std::string& name) const {
  const CLI::Option* o = app_->get_option_no_throw(name);
  return o != nullptr && o != app_->get_help_ptr();
}

Parsed FlagSet::parse(const std::vector<std::string>& args) {
  Parsed out;
  problems_.clear();
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app_->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out.help = true;
    return out;
  } catch (const CLI::ArgumentMismatch& e) {
    // Its only cause with one value per flag: the arguments ran out after a flag that needs a value.
    const std::string& last = args.empty() ? std::string() : args.back();
    if (looks_like_flag(last) && last.find('=') == std::string::npos) {
      out.problems.push_back({FlagProblem::Kind::kNoValue, last, ""});
    } else {
      out.problems.push_back({FlagProblem::Kind::kBadValue, "", e.what()});
    }
    return out;
  } catch (const CLI::ParseError& e) {  // none expected: every value is a Reader's to refuse
    out.problems.push_back({FlagProblem::Kind::kBadValue, "", e.what()});
    return out;
  }
  out.problems = std::move(problems_);
  leftovers(app_->remaining(), out.problems);
  return out;
}

std::string FlagSet::help() const { return app_->help(); }

std::string FlagSet::flags_help() const {
  const auto layout = std::dynamic_pointer_cast<CLI::Formatter>(app_->get_formatter());
  std::string out;
  for (const CLI::Option* o :
       app_->get_options([this](const CLI::Option* o) { return o->nonpositional() && o != app_->get_help_ptr(); })) {
    out += layout->make_option(o, false);
  }
  return out;
}

std::string is_not(const std::string& value, std::string_view what) {
  return "'" + value + "' is not " + std::string(what);
}

Reader text(std::string& out) {
  return [&out](const std::string& v) {
    out = v;
    return std::string();
  };
}

Reader text_list(std::vector<std::string>& out) {
  return [&out](const std::string& v) {
    out.push_back(v);
    return std::string();
  };
}

std::optional<unsigned long long> read_whole(const std::string& value, unsigned long long lo, unsigned long long hi) {
  unsigned long long n = 0;
  const char* end = value.data() + value.size();
  const auto [p, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc{} || p != end || value.empty() || n < lo || n > hi) return std::nullopt;
  return n;
}

}  // namespace rk::cli
