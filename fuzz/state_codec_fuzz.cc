// fuzz/state_codec_fuzz.cc: the state codec (src/core/state_codec.h), which reads state files and states other
// servers send. The first byte picks the algorithm; the rest is decoded as a run of states. Whatever decodes must
// encode back to exactly the bytes it was read from (one encoding per state), and nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/state_codec.h"

namespace {

template <class Algo>
void run(std::string_view in) {
  while (!in.empty()) {
    const std::string_view before = in;
    typename Algo::State s;
    if (!rk::core::decode_state<Algo>(in, s)) return;
    std::string again;
    rk::core::encode_state<Algo>(s, again);
    if (again != before.substr(0, before.size() - in.size())) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 6) {
    case 0: run<rk::core::Earrrl>(in); break;
    case 1: run<rk::core::Gcra>(in); break;
    case 2: run<rk::core::Fluid>(in); break;
    case 3: run<rk::core::FixedWindow>(in); break;
    case 4: run<rk::core::SlidingWindow>(in); break;
    default: run<rk::core::SlidingLog>(in); break;
  }
  return 0;
}
