// store/redis/resp.cc: RESP2 encoding and the incremental, bounded reply parser (resp.h).
#include "store/redis/resp.h"

#include <charconv>

namespace rk::store::redis {

void encode(std::string& out, const std::vector<std::string>& args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const std::string& a : args) {
    out += '$';
    out += std::to_string(a.size());
    out += "\r\n";
    out += a;
    out += "\r\n";
  }
}

Parser::Status Parser::line(std::size_t& at, std::string_view& out) {
  const std::size_t end = buf_.find("\r\n", at);
  if (end == std::string::npos) {
    // A header line is short; one that is not, without its CRLF, is not RESP.
    if (buf_.size() - at > 64 * 1024) {
      error_ = "a reply line longer than 64 KiB";
      return Status::kBad;
    }
    return Status::kNeedMore;
  }
  out = std::string_view(buf_).substr(at, end - at);
  at = end + 2;
  return Status::kDone;
}

Parser::Status Parser::number(std::string_view text, std::int64_t& out) {
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size()) {
    error_ = "not a number: '" + std::string(text.substr(0, 32)) + "'";
    return Status::kBad;
  }
  return Status::kDone;
}

Parser::Status Parser::parse(std::size_t& at, Reply& out, std::size_t depth) {
  if (at >= buf_.size()) return Status::kNeedMore;
  const char kind = buf_[at++];
  std::string_view text;
  if (Status s = line(at, text); s != Status::kDone) return s;
  switch (kind) {
    case '+':
      out.type = Reply::Type::kSimple;
      out.str.assign(text);
      return Status::kDone;
    case '-':
      out.type = Reply::Type::kError;
      out.str.assign(text);
      return Status::kDone;
    case ':': out.type = Reply::Type::kInteger; return number(text, out.integer);
    case '$': {
      std::int64_t n = 0;
      if (Status s = number(text, n); s != Status::kDone) return s;
      if (n == -1) {
        out.type = Reply::Type::kNil;
        return Status::kDone;
      }
      if (n < 0 || static_cast<std::uint64_t>(n) > limits_.max_bulk) {
        error_ = "bulk length " + std::to_string(n) + " (at most " + std::to_string(limits_.max_bulk) + ")";
        return Status::kBad;
      }
      const auto len = static_cast<std::size_t>(n);
      if (buf_.size() - at < len + 2) return Status::kNeedMore;
      if (buf_[at + len] != '\r' || buf_[at + len + 1] != '\n') {
        error_ = "a bulk string not followed by CRLF";
        return Status::kBad;
      }
      out.type = Reply::Type::kBulk;
      out.str.assign(buf_, at, len);
      at += len + 2;
      return Status::kDone;
    }
    case '*': {
      std::int64_t n = 0;
      if (Status s = number(text, n); s != Status::kDone) return s;
      if (n == -1) {
        out.type = Reply::Type::kNil;
        return Status::kDone;
      }
      if (n < 0 || static_cast<std::uint64_t>(n) > limits_.max_elements) {
        error_ = "array length " + std::to_string(n) + " (at most " + std::to_string(limits_.max_elements) + ")";
        return Status::kBad;
      }
      if (depth >= limits_.max_depth) {
        error_ = "arrays nested deeper than " + std::to_string(limits_.max_depth);
        return Status::kBad;
      }
      out.type = Reply::Type::kArray;
      out.elements.clear();
      out.elements.reserve(std::min<std::size_t>(static_cast<std::size_t>(n), 1024));
      for (std::int64_t i = 0; i < n; ++i) {
        Reply e;
        if (Status s = parse(at, e, depth + 1); s != Status::kDone) return s;
        out.elements.push_back(std::move(e));
      }
      return Status::kDone;
    }
    default:
      error_ = "unknown reply type byte " + std::to_string(static_cast<unsigned char>(kind));
      return Status::kBad;
  }
}

std::optional<Reply> Parser::next() {
  if (failed()) return std::nullopt;
  std::size_t at = pos_;
  Reply r;
  const Status s = parse(at, r, 0);
  if (s != Status::kDone) return std::nullopt;  // kNeedMore: parsed again from pos_ when more bytes come
  pos_ = at;
  if (pos_ > 64 * 1024 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  } else if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return r;
}

}  // namespace rk::store::redis
