// server/http/request_parser.h (internal): Beast's HTTP/1.1 request parser, writing into one connection's
// reusable storage, so a kept-alive connection parses request after request without allocating.
//
// Beast hands the parser views into the read buffer, which may move before the request is complete; so the
// method, target and fields are copied into RequestData::text, and views are made only once the head is done.
//
//   RequestData data;                 // one per connection
//   data.clear();
//   RequestParser parser(data);       // one per request (Beast's parsers are single-use; this one is cheap)
//   parser.header_limit(...); parser.body_limit(...);
//   n = parser.put(buffer, ec);       // as bytes arrive; then parser.is_done(), data.method(), data.fields()...
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/server.h"

namespace rk::server::http::detail {

class RequestData {
 public:
  void clear();
  std::string_view method() const { return view(method_); }
  std::string_view target() const { return view(target_); }
  std::span<const Field> fields() const { return views_; }
  std::string& body() { return body_; }
  const std::string& body() const { return body_; }
  bool expect_continue() const { return expect_continue_; }
  bool transfer_encoding() const { return transfer_encoding_; }
  int version() const { return version_; }  // 10 or 11

 private:
  friend class RequestParser;
  struct Span {
    std::uint32_t offset = 0, size = 0;
  };
  Span append(std::string_view s);
  std::string_view view(Span s) const { return {text_.data() + s.offset, s.size}; }
  void finish_head();  // makes views_: text_ no longer grows

  std::string text_;
  Span method_, target_;
  std::vector<std::pair<Span, Span>> spans_;
  std::vector<Field> views_;
  std::string body_;
  bool expect_continue_ = false;
  bool transfer_encoding_ = false;
  int version_ = 11;
};

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  explicit RequestParser(RequestData& data) : data_(data) {}

 private:
  using error_code = boost::system::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;
  using verb = boost::beast::http::verb;

  void on_request_impl(verb, string_view method, string_view target, int version, error_code&) override;
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(field f, string_view name, string_view value, error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length, error_code&) override;
  std::size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  RequestData& data_;
};

}  // namespace rk::server::http::detail
