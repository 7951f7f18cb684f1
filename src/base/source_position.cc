#include "base/source_position.h"

namespace rk::base {

std::string SourcePos::to_string() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string SourceError::to_string() const { return pos.to_string() + ": " + message; }

}  // namespace rk::base
