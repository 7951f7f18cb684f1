// core/state_codec.h: each algorithm's state as bytes and back, so that a state can leave the process (the state
// file `serve --state-file` writes, a state shipped to another server) and come back exactly as it was.
//
//   std::string bytes;
//   encode_state<Gcra>(state, bytes);           // appends
//   std::string_view in = bytes;
//   GcraState back;
//   if (!decode_state<Gcra>(in, back)) ...      // consumes what it read; false: malformed, `back` unspecified
//
// The encoding is little-endian and fixed-width (a double is its IEEE-754 bits), with no header and no version:
// whoever frames the states (a file, a message) versions the frame. A sliding window counter is its two packed
// words (core/windows.h; their layout depends on the window, which the frame's rule fixes). A sliding log is its
// entry count (u32, at most kMaxLogEntries) then its entries (t_ns i64, cost u64), oldest first. Decoding refuses
// what no run of the algorithm can produce (a NaN or negative EARRRL estimate, a fluid fraction outside [0, 1), a log
// out of order, a zero cost, a sum that overflows), so that bytes from anywhere cannot make a decision compute
// nonsense; it never allocates more than the input's own length justifies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/algorithms.h"
#include "ratekeeper/params.h"

namespace rk::core {

// A log holds at most `limit` entries and validation caps the limit at kMaxSlidingLogLimit (1e6).
inline constexpr std::uint32_t kMaxLogEntries = 1'000'000;

// The most bytes encode() writes for one state of `algorithm` limiting to `limit` per window: a sliding log's count
// and at most `limit` entries (kMaxLogEntries at most); every other state is 16 bytes or fewer. What a reader bounds
// a file of states by before it reads one.
std::size_t max_encoded_bytes(Algorithm algorithm, double limit);

void encode(const EarrrlState& s, std::string& out);
void encode(const GcraState& s, std::string& out);
void encode(const FluidState& s, std::string& out);
void encode(const FixedWindowState& s, std::string& out);
void encode(const SlidingWindowState& s, std::string& out);
void encode(const SlidingLogState& s, std::string& out);

bool decode(std::string_view& in, EarrrlState& s);
bool decode(std::string_view& in, GcraState& s);
bool decode(std::string_view& in, FluidState& s);
bool decode(std::string_view& in, FixedWindowState& s);
bool decode(std::string_view& in, SlidingWindowState& s);
bool decode(std::string_view& in, SlidingLogState& s);

template <class Algo>
void encode_state(const typename Algo::State& s, std::string& out) {
  encode(s, out);
}

template <class Algo>
bool decode_state(std::string_view& in, typename Algo::State& s) {
  return decode(in, s);
}

// Little-endian fixed-width integers, for whoever frames the states too (one byte order, written once).
void put_u32(std::uint32_t v, std::string& out);
void put_u64(std::uint64_t v, std::string& out);
bool get_u32(std::string_view& in, std::uint32_t& v);
bool get_u64(std::string_view& in, std::uint64_t& v);

}  // namespace rk::core
