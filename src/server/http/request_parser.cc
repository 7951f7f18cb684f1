#include "server/http/request_parser.h"

#include <boost/beast/http/error.hpp>

#include "server/http/ascii.h"

namespace rk::server::http::detail {

void RequestData::clear() {
  text_.clear();
  method_ = target_ = {};
  spans_.clear();
  views_.clear();
  body_.clear();
  expect_continue_ = false;
  transfer_encoding_ = false;
  version_ = 11;
}

RequestData::Span RequestData::append(std::string_view s) {
  // The head is at most header_limit bytes (a uint32), so offsets fit.
  const Span span{static_cast<std::uint32_t>(text_.size()), static_cast<std::uint32_t>(s.size())};
  text_.append(s);
  return span;
}

void RequestData::finish_head() {
  views_.clear();
  for (const auto& [name, value] : spans_) views_.push_back({view(name), view(value)});
}

void RequestParser::on_request_impl(verb, string_view method, string_view target, int version, error_code&) {
  data_.method_ = data_.append({method.data(), method.size()});
  data_.target_ = data_.append({target.data(), target.size()});
  data_.version_ = version;
}

void RequestParser::on_field_impl(field f, string_view name, string_view value, error_code&) {
  if (is_header_done()) return;  // a chunked body's trailer: not part of the head
  if (f == field::transfer_encoding) data_.transfer_encoding_ = true;
  if (f == field::expect && iequals({value.data(), value.size()}, "100-continue")) data_.expect_continue_ = true;
  data_.spans_.emplace_back(data_.append({name.data(), name.size()}), data_.append({value.data(), value.size()}));
}

void RequestParser::on_header_impl(error_code& ec) {
  // Beast ignores a Transfer-Encoding whose last coding is not chunked, which would read the body as the next
  // request: a way to smuggle one past a proxy that frames differently. HTTP/1.0 has no transfer codings.
  if (data_.transfer_encoding_ && (!chunked() || data_.version_ < 11)) {
    ec = boost::beast::http::error::bad_transfer_encoding;
    return;
  }
  data_.finish_head();
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length, error_code&) {
  // Beast has already refused a Content-Length over the body limit.
  if (content_length) data_.body_.reserve(static_cast<std::size_t>(*content_length));
}

std::size_t RequestParser::on_body_impl(string_view body, error_code&) {
  data_.body_.append(body.data(), body.size());
  return body.size();
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  data_.body_.append(body.data(), body.size());
  return body.size();
}

}  // namespace rk::server::http::detail

namespace rk::server::http {

bool is_field(const Field& field, std::string_view name) { return detail::iequals(field.name, name); }

std::string_view Request::header(std::string_view name) const {
  for (const Field& f : fields) {
    if (is_field(f, name)) return f.value;
  }
  return {};
}

std::vector<std::string_view> Request::headers(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const Field& f : fields) {
    if (is_field(f, name)) out.push_back(f.value);
  }
  return out;
}

}  // namespace rk::server::http
