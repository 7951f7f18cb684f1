#include "base/percent.h"

#include "base/hex.h"

namespace rk::base {

bool form_decode(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  bool well_formed = true;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int hi = in[i] == '%' && i + 2 < in.size() ? hex_value(in[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_value(in[i + 2]) : -1;
    if (in[i] == '+') {
      out += ' ';
    } else if (lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      well_formed = well_formed && in[i] != '%';
      out += in[i];
    }
  }
  return well_formed;
}

}  // namespace rk::base
