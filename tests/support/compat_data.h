// tests/support/compat_data.h: the data a released version left in tests/testdata/compat/, which the compatibility
// tests (docs/upgrading.md) hold every later minor version to. With RK_COMPAT_RECORD=1 in the environment a test
// writes what this build makes instead of comparing: done once, when a version is released.
//
//   if (compat::recording()) return compat::record("serve_flags.txt", listed);
//   const std::string recorded = compat::read("serve_flags.txt");
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

namespace compat {

inline std::string path(const std::string& name) { return std::string(RK_TESTDATA) + "/compat/" + name; }

inline bool recording() {
  const char* v = std::getenv("RK_COMPAT_RECORD");
  return v != nullptr && std::string(v) == "1";
}

// Writes `bytes` as the recorded `name`, and says so in the test's output.
inline void record(const std::string& name, const std::string& bytes) {
  std::ofstream out(path(name), std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << "cannot write " << path(name);
  std::cout << "recorded " << path(name) << " (" << bytes.size() << " bytes)\n";
}

// The recorded `name`'s bytes; a failure if it is missing (the version's data was never recorded).
inline std::string read(const std::string& name) {
  std::ifstream in(path(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << path(name) << " is missing: RK_COMPAT_RECORD=1 records it from this build";
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The lines of a recorded text, without blank lines and `#` comments.
inline std::set<std::string> lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') out.insert(line);
  }
  return out;
}

inline std::string join(const std::set<std::string>& lines, const std::string& header) {
  std::string out = header;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace compat
