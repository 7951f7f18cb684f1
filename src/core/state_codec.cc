#include "core/state_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace rk::core {

void put_u32(std::uint32_t v, std::string& out) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void put_u64(std::uint64_t v, std::string& out) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

bool get_u32(std::string_view& in, std::uint32_t& v) {
  if (in.size() < 4) return false;
  v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(4);
  return true;
}

bool get_u64(std::string_view& in, std::uint64_t& v) {
  if (in.size() < 8) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(8);
  return true;
}

namespace {

void put_i64(std::int64_t v, std::string& out) { put_u64(static_cast<std::uint64_t>(v), out); }
void put_f64(double v, std::string& out) { put_u64(std::bit_cast<std::uint64_t>(v), out); }

bool get_i64(std::string_view& in, std::int64_t& v) {
  std::uint64_t u;
  if (!get_u64(in, u)) return false;
  v = static_cast<std::int64_t>(u);
  return true;
}

bool get_f64(std::string_view& in, double& v) {
  std::uint64_t u;
  if (!get_u64(in, u)) return false;
  v = std::bit_cast<double>(u);
  return true;
}

}  // namespace

std::size_t max_encoded_bytes(Algorithm algorithm, double limit) {
  if (algorithm != Algorithm::kSlidingLog) return 16;
  // Every entry costs at least 1, and a log's costs sum to at most its limit.
  const double entries = std::min(std::ceil(std::max(limit, 0.0)), static_cast<double>(kMaxLogEntries));
  return 4 + 16 * static_cast<std::size_t>(entries);
}

void encode(const EarrrlState& s, std::string& out) {
  put_f64(s.n, out);
  put_i64(s.t_ns, out);
}

bool decode(std::string_view& in, EarrrlState& s) {
  return get_f64(in, s.n) && get_i64(in, s.t_ns) && std::isfinite(s.n) && s.n >= 0;
}

void encode(const GcraState& s, std::string& out) { put_i64(s.tat_ns, out); }

bool decode(std::string_view& in, GcraState& s) { return get_i64(in, s.tat_ns); }

void encode(const FluidState& s, std::string& out) {
  put_i64(s.empty_ns, out);
  put_f64(s.frac, out);
}

bool decode(std::string_view& in, FluidState& s) {
  return get_i64(in, s.empty_ns) && get_f64(in, s.frac) && s.frac >= 0 && s.frac < 1;  // NaN fails both
}

void encode(const FixedWindowState& s, std::string& out) {
  put_i64(s.start_ns, out);
  put_u64(s.count, out);
}

bool decode(std::string_view& in, FixedWindowState& s) { return get_i64(in, s.start_ns) && get_u64(in, s.count); }

void encode(const SlidingWindowState& s, std::string& out) {
  put_u64(s.lo, out);
  put_u64(s.hi, out);
}

// Any 128 bits are some window and counts (core/windows.h): nothing to refuse.
bool decode(std::string_view& in, SlidingWindowState& s) { return get_u64(in, s.lo) && get_u64(in, s.hi); }

void encode(const SlidingLogState& s, std::string& out) {
  put_u32(s.size(), out);
  for (std::uint32_t i = 0; i < s.size(); ++i) {
    put_i64(s.at(i).t_ns, out);
    put_u64(s.at(i).cost, out);
  }
}

bool decode(std::string_view& in, SlidingLogState& s) {
  constexpr std::size_t kEntryBytes = 16;
  std::uint32_t n;
  if (!get_u32(in, n) || n > kMaxLogEntries || in.size() / kEntryBytes < n) return false;
  SlidingLogState log;
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::int64_t t = 0;
    std::uint64_t cost = 0;
    get_i64(in, t);  // the bytes are there: checked above
    get_u64(in, cost);
    // push() merges equal times and the decision relies on order: only strictly increasing times, as logged.
    if (cost == 0 || (i > 0 && t <= log.at(i - 1).t_ns) || __builtin_add_overflow(sum, cost, &sum)) return false;
    log.push(t, cost);
  }
  s = std::move(log);
  return true;
}

}  // namespace rk::core
