// base/source_position.h: a place in a text file and a problem found there, said as compilers say them, so that
// an editor can jump to it: rules files, simulator scenarios, every file the YAML reader reads.
//
//   SourceError e{{"rules/edge.yaml", 4, 39}, "rate_limit.unit: 'secs' is not a unit"};
//   e.to_string()      -> "rules/edge.yaml:4:39: rate_limit.unit: 'secs' is not a unit"
//   e.pos.to_string()  -> "rules/edge.yaml:4:39"       SourcePos{"a.yaml"}.to_string() -> "a.yaml"
#pragma once

#include <string>

namespace rk::base {

struct SourcePos {
  std::string file;
  int line = 0;    // 1-based; 0 when the problem is the file as a whole (it cannot be read, it is too large)
  int column = 0;  // 1-based
  std::string to_string() const;  // "file:line:column", or "file" when line is 0
};

struct SourceError {
  SourcePos pos;
  std::string message;
  std::string to_string() const;  // "file:line:column: message", or "file: message"
};

}  // namespace rk::base
