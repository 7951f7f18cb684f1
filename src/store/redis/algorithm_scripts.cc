// store/redis/algorithm_scripts.cc: each algorithm's Lua text, its ARGV and the decoding of its reply
// (algorithm_scripts.h).
#include "store/redis/algorithm_scripts.h"

#include <bit>
#include <charconv>
#include <cmath>

#include "base/content_hash.h"
#include "base/number_text.h"
#include "core/numeric.h"
#include "core/algorithms.h"
#include "core/derived_params.h"
#include "store/redis/lua_sources.h"

namespace rk::store::redis {

namespace {

// The shortest text that reads back as exactly v (Lua's tonumber is strtod): every bit, without printf's cost.
std::string num(double v) { return base::shortest_number(v); }

// The tag byte that leads every state in Redis: the version of the layout in its high four bits, the algorithm in
// its low four (prelude.lua). A state in an older layout of the same algorithm is read as fresh, once, rather than
// misread: layouts 1 and 2 were MessagePack tables tagged with the name ('fixed_window', 'fixed_window.2'), which
// the prelude still recognises by `name`. Changing a layout is a new version here and a check in older().
constexpr int kLayout = 3;

std::string script_text(Algorithm a, std::initializer_list<std::string_view> parts) {
  const int tag = kLayout << 4 | (static_cast<int>(a) + 1);
  static_assert(std::size(kAllAlgorithms) < 16);
  std::string s = "local ALGORITHM = '" + std::string(algorithm_name(a)) + "'\n";
  s += "local TAG = " + std::to_string(tag) + "\n";
  s += "local PACK_FIELDS, PACK_VALUE = " + std::to_string(kPackedFields) + ", " + std::to_string(kPackedValueBytes) +
       "\n";
  s += lua::kPrelude;
  for (std::string_view p : parts) s += p;
  return s;
}

// The function's name: the algorithm's and the text's content_hash (FNV-1a, 64 bits), so that servers of two
// versions sharing a Redis (a rolling upgrade) each call their own.
std::string function_name(std::string_view algorithm, std::string_view text) {
  return "rk_" + std::string(algorithm) + "_" + base::content_hash(text);
}

// Each algorithm's texts for one entry point: `entry`, called as decide(KEYS, ARGV) is, after `extra` Lua.
struct Table {
  std::string text[std::size(kAllAlgorithms)];
  std::string library[std::size(kAllAlgorithms)];
  std::string function[std::size(kAllAlgorithms)];
  ScriptSource sources[std::size(kAllAlgorithms)];
  Table(std::string_view entry, std::string_view extra, std::string_view infix) {
    for (Algorithm a : kAllAlgorithms) {
      const auto i = static_cast<std::size_t>(a);
      const std::string_view name = algorithm_name(a);
      std::string body;
      switch (a) {
        case Algorithm::kEarrrl: body = script_text(a, {lua::kEarrrl}); break;
        case Algorithm::kGcra:
        case Algorithm::kLeakyQueue: body = script_text(a, {lua::kGcra}); break;
        case Algorithm::kTokenBucket:
        case Algorithm::kLeakyBucket: body = script_text(a, {lua::kFluid}); break;
        case Algorithm::kFixedWindow: body = script_text(a, {lua::kWindows, lua::kFixedWindow}); break;
        case Algorithm::kSlidingLog: body = script_text(a, {lua::kSlidingLog}); break;  // no window maths
        case Algorithm::kSlidingWindow: body = script_text(a, {lua::kWindows, lua::kSlidingWindow}); break;
      }
      // Each algorithm's text ends with its decide(keys, args): run at once by an EVAL script, registered by a
      // function library (lua_script.h).
      body += extra;
      function[i] = function_name(std::string(name) + std::string(infix), body);
      text[i] = body + "return " + std::string(entry) + "(KEYS, ARGV)\n";
      library[i] = "#!lua name=" + function[i] + "\n" + body + "redis.register_function('" + function[i] + "', " +
                   std::string(entry) + ")\n";
      sources[i] = {name, text[i], library[i], function[i]};
    }
  }
};

const Table& table() {
  static const Table t("decide", "", "");
  return t;
}

const Table& reservation_table() {
  static const Table t("reservation", lua::kReservations, "_reserve");
  return t;
}

// A duration in the reply: whole nanoseconds (exact, as an integer or, above 2^53, as its digits), a Lua number
// Redis wrote as an integer, or -1 for never.
std::optional<Nanos> duration(const std::string& s) {
  std::int64_t ns = 0;
  if (const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), ns);
      ec == std::errc{} && p == s.data() + s.size()) {
    return ns < 0 ? kNever : Nanos{ns};
  }
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  if (v < 0) return kNever;
  if (v >= 9.2e18) return Nanos{core::kMaxI64};
  return Nanos{static_cast<std::int64_t>(v)};
}

}  // namespace

const ScriptSource& script_for(Algorithm algorithm) { return table().sources[static_cast<std::size_t>(algorithm)]; }

const ScriptSource& reservation_script_for(Algorithm algorithm) {
  return reservation_table().sources[static_cast<std::size_t>(algorithm)];
}

namespace {

// Each algorithm's parameters as the script reads them, ARGV[5] on (src/store/redis/lua/*.lua).
void append(std::vector<std::string>& a, Algorithm, const core::EarrrlParams& p) {
  for (double v : {p.lambda, p.rate, p.n_saturate, p.n_forget, p.window_ns, p.limit}) a.push_back(num(v));
  a.push_back(p.count_refused ? "1" : "0");
  a.push_back(num(p.inv_n_forget));
  a.push_back(num(p.inv_lambda));
}

void append(std::vector<std::string>& a, Algorithm algorithm, const core::GcraParams& p) {
  a.push_back(std::to_string(p.interval_ns));
  a.push_back(std::to_string(p.tolerance_ns));
  a.push_back(num(p.limit));
  a.push_back(algorithm == Algorithm::kLeakyQueue ? "1" : "0");
  a.push_back(std::to_string(p.max_backlog_ns));
}

void append(std::vector<std::string>& a, Algorithm, const core::FluidParams& p) {
  for (double v : {p.capacity, p.interval, p.tolerance, p.max_backlog}) a.push_back(num(v));
}

void append(std::vector<std::string>& a, Algorithm, const core::WindowParams& p) {
  // The window as whole microseconds and the nanoseconds beyond: each exact in a Lua number, whatever its length.
  const std::int64_t us = core::floor_div(p.window_ns, 1000);
  a.push_back(std::to_string(us));
  a.push_back(std::to_string(p.window_ns - us * 1000));
  a.push_back(std::to_string(p.limit));
  a.push_back(p.count_refused ? "1" : "0");
  switch (p.calendar) {
    case core::Calendar::kNone: a.emplace_back("0"); break;
    case core::Calendar::kWeek: a.emplace_back("week"); break;
    case core::Calendar::kMonth: a.emplace_back("month"); break;
    case core::Calendar::kYear: a.emplace_back("year"); break;
  }
}

}  // namespace

std::vector<std::string> script_args(const LimitSpec& spec, std::optional<Nanos> now, std::uint64_t cost, bool peek) {
  std::vector<std::string> a;
  if (now) {
    const std::int64_t t = now->count();
    const std::int64_t us = core::floor_div(t, 1000);
    a.push_back(std::to_string(us));
    a.push_back(std::to_string(t - us * 1000));
  } else {
    a.emplace_back();
    a.emplace_back("0");
  }
  a.push_back(std::to_string(cost));
  a.push_back(peek ? "1" : "0");
  core::with_algorithm(spec, [&]<class Algo>(const typename Algo::Params& p) { append(a, spec.algorithm, p); });
  return a;
}

namespace {

LimitSpec with_count_refused(LimitSpec spec, bool count_refused) {
  spec.count_refused = count_refused;
  return spec;
}

}  // namespace

std::vector<std::string> reserve_args(const LimitSpec& spec, std::optional<Nanos> now, std::uint64_t estimate,
                                      Nanos ttl) {
  std::vector<std::string> a = script_args(with_count_refused(spec, false), now, estimate, false);
  a[3] = "r";
  a.push_back(std::to_string(ttl.count()));
  return a;
}

std::vector<std::string> settle_args(const LimitSpec& spec, std::optional<Nanos> now, std::uint64_t actual) {
  std::vector<std::string> a = script_args(spec, now, actual, false);
  a[3] = "s";
  const std::vector<std::string> debit = script_args(with_count_refused(spec, true), now, actual, false);
  a.insert(a.end(), debit.begin() + 4, debit.end());
  return a;
}

std::variant<Decision, std::string> decode_reply(std::span<const std::string> e) {
  if (e.size() != 5) return "the script's reply has " + std::to_string(e.size()) + " elements, not 5";
  Decision d;
  if (e[0] != "0" && e[0] != "1") return "the script's reply says allowed='" + e[0].substr(0, 32) + "'";
  d.allowed = e[0] == "1";
  if (e[1].size() != 24) {
    return "the script's reply has " + std::to_string(e[1].size()) + " bytes of numbers, not 24";
  }
  // Three little-endian IEEE doubles: limit, remaining, estimate (NaN: none).
  double v[3];
  for (int i = 0; i < 3; ++i) {
    std::uint64_t bits = 0;
    for (int b = 7; b >= 0; --b)
      bits = bits << 8 | static_cast<unsigned char>(e[1][static_cast<std::size_t>(i * 8 + b)]);
    v[i] = std::bit_cast<double>(bits);
  }
  d.limit = v[0];
  d.remaining = v[1];
  if (!std::isfinite(d.limit) || !std::isfinite(d.remaining)) {
    return "the script's reply has a limit or remaining that is not a number";
  }
  if (!std::isnan(v[2])) d.estimate = v[2];
  std::optional<Nanos> retry = duration(e[2]), reset = duration(e[3]), delay = duration(e[4]);
  if (!retry || !reset || !delay) return "the script's reply has a field that is not a number";
  d.retry_after = *retry;
  d.reset_after = *reset;
  d.delay = *delay;
  return d;
}

}  // namespace rk::store::redis
