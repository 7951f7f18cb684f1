// fuzz/trace_fuzz.cc: `ratekeeper replay`'s trace lines (src/cli/trace.h), one line at a time as replay reads them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cli/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::size_t max_key_bytes = 64;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    rk::cli::TraceLine out;
    std::string error;
    switch (rk::cli::parse_trace_line(line, max_key_bytes, out, error)) {
      case rk::cli::TraceParse::kAttempt:
        // The key is a view into the line: it must lie inside it, and respect the bound.
        if (out.key.empty() || out.key.size() > max_key_bytes || out.key.data() < line.data() ||
            out.key.data() + out.key.size() > line.data() + line.size()) {
          __builtin_trap();
        }
        break;
      case rk::cli::TraceParse::kError:
        if (error.empty()) __builtin_trap();  // an error always says what is wrong
        break;
      case rk::cli::TraceParse::kNothing: break;
    }
    max_key_bytes = max_key_bytes == 64 ? 4096 : 64;  // both a tight and the default bound
  }
  return 0;
}
