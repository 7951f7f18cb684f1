#include "base/source_position.h"

#include <gtest/gtest.h>

namespace rk::base {
namespace {

TEST(SourcePosition, SaysFileLineColumnAsCompilersDo) {
  EXPECT_EQ((SourcePos{"rules/edge.yaml", 4, 39}).to_string(), "rules/edge.yaml:4:39");
  EXPECT_EQ((SourceError{{"bad.yaml", 2, 1}, "domain: missing"}).to_string(), "bad.yaml:2:1: domain: missing");
}

TEST(SourcePosition, LineZeroIsTheFileAsAWhole) {
  EXPECT_EQ((SourcePos{"a.yaml", 0, 0}).to_string(), "a.yaml");
  EXPECT_EQ((SourceError{{"a.yaml", 0, 0}, "cannot open the file"}).to_string(), "a.yaml: cannot open the file");
  EXPECT_EQ(SourcePos{}.to_string(), "");
}

}  // namespace
}  // namespace rk::base
