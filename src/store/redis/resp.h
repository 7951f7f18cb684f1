// store/redis/resp.h: the Redis protocol (RESP2): commands out as arrays of bulk strings, replies in through an
// incremental, bounded parser that any byte sequence can be fed to without harm.
//
//   std::string out;
//   rk::store::redis::encode(out, {"EVALSHA", sha, "1", key, "5"});
//   rk::store::redis::Parser p;
//   p.feed(bytes);                      // any split: a byte at a time works
//   while (auto r = p.next()) use(*r);  // each complete reply, in order
//   if (p.failed()) drop_connection(p.error());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rk::store::redis {

struct Reply {
  enum class Type : std::uint8_t { kSimple, kError, kInteger, kBulk, kNil, kArray };
  Type type = Type::kNil;
  std::string str;              // kSimple, kError, kBulk
  std::int64_t integer = 0;     // kInteger
  std::vector<Reply> elements;  // kArray
};

void encode(std::string& out, const std::vector<std::string>& args);

struct ParserLimits {
  std::size_t max_bulk = 64 << 20;     // bytes in one bulk string
  std::size_t max_elements = 1 << 20;  // in one array
  std::size_t max_depth = 16;          // arrays within arrays
};

class Parser {
 public:
  explicit Parser(ParserLimits limits = {}) : limits_(limits) {}
  void feed(std::string_view bytes) { buf_.append(bytes); }
  // The next complete reply, or nullopt when more bytes are needed or the input is malformed (see failed()).
  std::optional<Reply> next();
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }  // names what was wrong, e.g. "bulk length -5"
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  enum class Status { kDone, kNeedMore, kBad };
  Status parse(std::size_t& at, Reply& out, std::size_t depth);
  Status line(std::size_t& at, std::string_view& out);
  Status number(std::string_view text, std::int64_t& out);

  ParserLimits limits_;
  std::string buf_;
  std::size_t pos_ = 0;  // start of the first unparsed reply in buf_
  std::string error_;
};

}  // namespace rk::store::redis
